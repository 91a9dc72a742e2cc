#!/usr/bin/env node
// Runs the benches and prints their figures:
//   npm run bench                    every bench/*.bench.{js,ts} except the opt-in ones
//   npm run bench NAME [ARGS...]     a bench named exactly NAME, else every bench whose name contains NAME;
//                                    arguments that name no bench are handed to the benches chosen
import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

// Run only when named: too long for a plain `npm run bench` (the 10-million-job scale bench takes an hour),
// or keeping a big file (startup keeps its 1M-job queue, 0.8 GB, in /tmp for the next run).
const OPT_IN = new Set(['scale', 'startup']);

const here = dirname(fileURLToPath(import.meta.url));
const names = readdirSync(here)
  .filter((f) => /\.bench\.(js|ts)$/.test(f))
  .map((f) => ({ file: f, name: f.replace(/\.bench\.(js|ts)$/, '') }))
  .sort((a, b) => a.name.localeCompare(b.name));
const args = process.argv.slice(2);

/** The benches an argument names: the one called exactly that, else those whose name contains it. */
function named(arg) {
  const exact = names.filter((b) => b.name === arg);
  return exact.length ? exact : names.filter((b) => b.name.includes(arg));
}

const chosen = new Set();
const passOn = [];
for (const arg of args) {
  const hits = named(arg);
  if (hits.length) for (const b of hits) chosen.add(b);
  else passOn.push(arg);
}
const benches = chosen.size ? names.filter((b) => chosen.has(b)) : names.filter((b) => !OPT_IN.has(b.name));
let failed = 0;
for (const { file, name } of benches) {
  process.stdout.write(`\n== ${name} ==\n`);
  const loader = file.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const r = spawnSync(process.execPath, [...loader, '--expose-gc', join(here, file), ...passOn], { stdio: 'inherit' });
  if (r.status !== 0) failed++;
}
process.exitCode = failed ? 1 : 0;
