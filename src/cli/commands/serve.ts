import { InvalidArgumentError, Option, type Command } from 'commander';
import { LlmqError } from '../../errors.js';
import { dbOption, durationIn } from '../options.js';
import { isBareHostName } from '../../serve/guard.js';
import { priceOptions, reportPriceTable, type PriceFlags } from './price-options.js';

interface ServeFlags extends PriceFlags {
  db?: string;
  port: number;
  host: string;
  allowHost?: string[];
  readOnly?: boolean;
  poll: number;
}

export function registerServe(program: Command): Command {
  const cmd = program
    .command('serve')
    .description('A live web dashboard over the queue: progress, throughput, cost, failures, runs on every machine; retry failed jobs.')
    .addOption(dbOption())
    .addOption(new Option('--port <n>', 'port to listen on (0 picks a free one)').default(8787).argParser(portNumber))
    .option('--host <address>', 'address to listen on; anything but 127.0.0.1 exposes the dashboard to your network', '127.0.0.1')
    .addOption(
      new Option(
        '--allow-host <name...>',
        'another name this machine is reached by (a DNS name, a reverse proxy): requests naming any other host are refused',
      ).argParser(allowedHosts),
    )
    .option('--read-only', 'serve no actions (no retry button)')
    .addOption(
      new Option('--poll <seconds>', 'how often the queue is read for live updates')
        .default(2)
        .argParser(durationIn('seconds', { above: 0 })),
    );
  for (const o of priceOptions()) cmd.addOption(o);
  return cmd
    .addHelpText(
      'after',
      `
Actions (retry failed jobs) need the token printed once at start: paste it into the page. The page
only answers to itself: requests from other sites' pages, and requests naming a host other than
its address (with --host 0.0.0.0: any IP address, localhost and this machine's name), are refused;
--allow-host adds names.

Examples:
  $ llmq serve                         # http://127.0.0.1:8787/
  $ llmq serve --db postgres://u@db/q --read-only --port 9000

Exit codes:
  130  stopped by Ctrl-C / SIGTERM / SIGHUP (the way it is meant to stop)
  1    the queue or the address could not be opened`,
    )
    .action(serveCommand);
}

async function serveCommand(flags: ServeFlags): Promise<void> {
  const [
    { resolveDbLocation, redactLocation },
    { openExistingStore },
    { startDashboard },
    { newToken },
    { findApiKey },
    { queueFileChangeText },
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../serve/server.js'),
    import('../../serve/guard.js'),
    import('../../provider/endpoint.js'),
    import('../../store/sqlite/queue-file.js'),
  ]);
  const location = resolveDbLocation(flags.db);
  const store = await openExistingStore(location);
  // an SQLite file removed or made again under this name is seen, not read on as it was
  const stillThere = () => {
    const change = store.queueFileChange();
    if (change)
      throw new Error(
        `${queueFileChangeText(location, change)} since this dashboard opened it: stop llmq serve and start it again to see the queue there now`,
      );
  };
  const prices = await reportPriceTable(flags, (await store.status()).lastRun).catch(async (error) => {
    await store.close();
    throw error;
  });
  const token = newToken();
  const apiKey = findApiKey(process.env)?.key;
  let dashboard;
  try {
    dashboard = await startDashboard({
      store,
      prices,
      db: redactLocation(location),
      host: flags.host,
      allowHosts: flags.allowHost ?? [],
      port: flags.port,
      readOnly: Boolean(flags.readOnly),
      token,
      pollMs: flags.poll * 1000,
      secrets: apiKey ? [apiKey] : [],
      stillThere,
    });
  } catch (error) {
    await store.close();
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE')
      throw new LlmqError(`port ${flags.port} on ${flags.host} is in use. Pick another with --port (or --port 0 for any free one).`);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
      throw new LlmqError(`cannot listen on ${flags.host}: no such address on this machine. Use --host 127.0.0.1.`);
    throw error;
  }
  process.stderr.write(`llmq dashboard for ${redactLocation(location)} at ${dashboard.url}\n`);
  if (flags.readOnly) process.stderr.write('read-only: no actions are served.\n');
  else process.stderr.write(`action token (shown once; paste it into the page to retry jobs): ${token}\n`);
  if (!['127.0.0.1', 'localhost', '::1'].includes(flags.host)) {
    process.stderr.write(`warning: listening on ${flags.host}: anyone who can reach this machine can read the dashboard.\n`);
  }
  process.stderr.write('Ctrl-C to stop.\n');
  await new Promise<void>((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, resolve);
  });
  await dashboard.close();
  await store.close();
  // As every llmq command a signal stops: a supervisor tells it from a dashboard that ended by itself.
  process.exitCode = 130;
}

/** --allow-host, each value a bare name (a scheme, port or path would never match a Host header). */
function allowedHosts(value: string, previous: string[] | undefined): string[] {
  if (!isBareHostName(value)) {
    throw new InvalidArgumentError(`Expected a host name or address, like dash.example or 10.0.0.5, without a scheme, port or path.`);
  }
  return [...(previous ?? []), value];
}

function portNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 65535) throw new InvalidArgumentError('Expected a port number from 0 to 65535.');
  return n;
}
