import type { Command } from 'commander';
import { dbOption } from '../program.js';
import { LlmqError } from '../../errors.js';

export function registerStatus(program: Command): Command {
  return program
    .command('status')
    .description('(not built yet)')
    .addOption(dbOption())
    .action(() => {
      throw new LlmqError('llmq status is not built yet.');
    });
}
