// The CLI's start: `llmq --version` and `llmq status --json` on a 1M-job SQLite queue, wall and CPU time of the whole
// process, and `show <id>` in-process. Targets (issue #14): status --json < 250 ms wall, show < 50 ms.
// The queue is made once with `llmq enqueue` and kept for the next run.
//   npm run bench startup   (only when named: it keeps its queue, 0.8 GB)
//   BENCH_DB=/tmp/s1m.db    where the kept queue is (default); delete it to make it again (~45 s)
//   BENCH_JOBS=1000000      documents in a new queue; BENCH_RUNS=20 timings of each command
//   LLMQ_BENCH_BIN=/tmp/old/bin/llmq.js  another build, timed in turns with this one (before/after figures)
import { createWriteStream, existsSync, readFileSync, rmSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { once } from 'node:events';
import { fmt } from './helpers.js';

const DB = process.env.BENCH_DB || '/tmp/s1m.db';
const JOBS = Number(process.env.BENCH_JOBS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const THIS = fileURLToPath(new URL('../bin/llmq.js', import.meta.url));
const builds = [...(process.env.LLMQ_BENCH_BIN ? [{ name: 'other', bin: process.env.LLMQ_BENCH_BIN }] : []), { name: 'this', bin: THIS }];

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** ~250 bytes a line, every line a distinct document. */
async function writeDocs(path: string): Promise<void> {
  const out = createWriteStream(path);
  const filler = 'lorem ipsum dolor sit amet consectetur adipiscing elit '.repeat(4);
  for (let i = 0; i < JOBS; i++) {
    if (!out.write(`${JSON.stringify({ id: `doc-${i}`, text: `document ${i}: ${filler}` })}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

/**
 * CPU time (user + system) of the children waited for so far: fields 16 and 17 of /proc/self/stat, in 10 ms ticks,
 * so one run's figure is coarse and the mean over all runs is reported.
 */
function childCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

function llmq(bin: string, args: string[]): { ms: number; cpuMs: number } {
  const cpu = childCpuMs();
  const t = performance.now();
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });
  const ms = performance.now() - t;
  if (r.status !== 0) throw new Error(`llmq ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
  return { ms, cpuMs: childCpuMs() - cpu };
}

if (!existsSync(DB)) {
  const jsonl = `${DB}.jsonl`;
  console.log(`making a queue of ${fmt(JOBS)} documents in ${DB} (load ${load()})`);
  const t = performance.now();
  await writeDocs(jsonl);
  const r = spawnSync(process.execPath, [THIS, 'enqueue', jsonl, '--db', DB, '--prompt', 'Summarize: {{text}}', '--model', 'gpt-4o-mini'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  rmSync(jsonl, { force: true });
  if (r.status !== 0) throw new Error(`enqueue exited with ${r.status}`);
  console.log(`  made in ${fmt((performance.now() - t) / 1000, 1)} s`);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
for (const [label, args] of [
  ['--version', ['--version']],
  ['status --json', ['status', '--json', '--db', DB]],
] as const) {
  const times = new Map(builds.map((b) => [b.name, { wall: [] as number[], cpu: [] as number[] }]));
  const loadBefore = load();
  for (const b of builds) llmq(b.bin, [...args]); // warm the page cache for each build
  // In turns, so a change in the machine's load falls on both builds alike.
  for (let i = 0; i < RUNS; i++)
    for (const b of builds) {
      const r = llmq(b.bin, [...args]);
      times.get(b.name)!.wall.push(r.ms);
      times.get(b.name)!.cpu.push(r.cpuMs);
    }
  for (const b of builds) {
    const { wall, cpu } = times.get(b.name)!;
    console.log(
      `${label.padEnd(14)} ${b.name.padEnd(6)} wall median ${fmt(median(wall)).padStart(4)} ms  min ${fmt(Math.min(...wall)).padStart(4)} ms` +
        `   CPU mean ${fmt(mean(cpu)).padStart(4)} ms` +
        `  (${RUNS} runs; load ${loadBefore} -> ${load()})`,
    );
  }
}

// `show <id>` in-process: one item's lookup in the big queue
const { openStore } = await import(pathToFileURL(fileURLToPath(new URL('../dist/store/open-store.js', import.meta.url))).href);
const store = await openStore(DB);
try {
  const ids = [0, JOBS / 2, JOBS - 1, 12_345 % JOBS, JOBS * 0.9].map((n) => `doc-${Math.floor(n)}`);
  const times: number[] = [];
  for (const id of [...ids, ...ids]) {
    const t = performance.now();
    if (!(await store.item(id))) throw new Error(`no item ${id} in ${DB}`);
    times.push(performance.now() - t);
  }
  console.log(`show <id>, in-process: median ${fmt(median(times), 2)} ms of ${times.length} (< 50 ms; load ${load()})`);
} finally {
  await store.close();
}
