import type { Command } from 'commander';
import { dbOption } from '../program.js';
import { LlmqError } from '../../errors.js';

export function registerEnqueue(program: Command): Command {
  return program
    .command('enqueue')
    .description('(not built yet)')
    .addOption(dbOption())
    .action(() => {
      throw new LlmqError('llmq enqueue is not built yet.');
    });
}
