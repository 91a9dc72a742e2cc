import type { Command } from 'commander';
import { dbOption } from '../program.js';
import { LlmqError } from '../../errors.js';

export function registerRetryFailed(program: Command): Command {
  return program
    .command('retry-failed')
    .description('(not built yet)')
    .addOption(dbOption())
    .action(() => {
      throw new LlmqError('llmq retry-failed is not built yet.');
    });
}
