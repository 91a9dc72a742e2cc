import type { Command } from 'commander';
import { dbOption } from '../program.js';
import { LlmqError } from '../../errors.js';

export function registerRun(program: Command): Command {
  return program
    .command('run')
    .description('(not built yet)')
    .addOption(dbOption())
    .action(() => {
      throw new LlmqError('llmq run is not built yet.');
    });
}
