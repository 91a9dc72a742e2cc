import type { Command } from 'commander';
import { dbOption } from '../program.js';
import { LlmqError } from '../../errors.js';

export function registerShow(program: Command): Command {
  return program
    .command('show')
    .description('(not built yet)')
    .addOption(dbOption())
    .action(() => {
      throw new LlmqError('llmq show is not built yet.');
    });
}
