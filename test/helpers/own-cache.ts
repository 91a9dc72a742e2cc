import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Every test process (and the CLIs it starts: cliEnv passes it on) keeps llmq's user cache (the
// genai-prices lookups) in a folder of its own: never the user's ~/.cache, never shared with
// another test file's process.
process.env.XDG_CACHE_HOME = mkdtempSync(join(tmpdir(), 'llmq-test-cache-'));
