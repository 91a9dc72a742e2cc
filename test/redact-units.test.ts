import { describe, expect, it } from 'vitest';
import { answerWithoutKey, isRedactableKey, mayHoldKeyRun, redactSecret } from '../src/provider/redact.js';
import { hasUrlCredentials, redactUrlCredentials, redactUrlQuery } from '../src/url-credentials.js';
import { redactLocation } from '../src/store/open-store.js';

const KEY = 'sk-SUPERSECRETKEY-0123456789abcdef';

describe('redactSecret: any run of 8 or more characters of the key', () => {
  it.each([
    ['the whole key', `got ${KEY}`, KEY, 'got [REDACTED]'],
    [
      'a 12-character prefix, as providers echo it',
      'Incorrect API key provided: sk-SUPERSECR...',
      KEY,
      'Incorrect API key provided: [REDACTED]...',
    ],
    ['exactly 8 characters from the middle', 'saw RETKEY-0 here', KEY, 'saw [REDACTED] here'],
    ['7 characters are ordinary text', 'saw RETKEY- here', KEY, 'saw RETKEY- here'],
    ['a suffix at the end of the text', 'tail 456789abcdef', KEY, 'tail [REDACTED]'],
    ['two separate runs', 'a sk-SUPERSEC b 89abcdef c', KEY, 'a [REDACTED] b [REDACTED] c'],
    ['two runs side by side become one', 'x sk-SUPERS0123456789y', KEY, 'x [REDACTED]y'],
    [
      'a key that is not shaped like an OpenAI key',
      'bad header Bearer my-local-token-xyz',
      'my-local-token-xyz',
      'bad header Bearer [REDACTED]',
    ],
    ['text shorter than 8 characters', 'sk-SUPE', KEY, 'sk-SUPE'],
    ['a one-character key redacts nothing of it', 'Bad request: Bearer B', 'B', 'Bad request: Bearer B'],
    ['a 7-character key redacts nothing of it', 'got abc1234 and abc1234', 'abc1234', 'got abc1234 and abc1234'],
    [
      'no key: only the known shapes',
      'Incorrect API key provided: sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA',
      undefined,
      'Incorrect API key provided: [REDACTED]',
    ],
    ['a short key still loses key-shaped text', 'Bearer abcdefghijklmnopqrstuvwxyz', 'B', '[REDACTED]'],
    ['URL passwords are masked too', 'connect to http://u:pw-SECRET@h/v1 failed', KEY, 'connect to http://u:***@h/v1 failed'],
    [
      'a key-shaped token sharing a run with the key goes whole, not cut to its ends',
      'bad key sk-abcdef1234567890abcd here',
      'sk-test-dummykey-1234567890',
      'bad key [REDACTED] here',
    ],
  ] as const)('%s', (_what, text, key, expected) => {
    expect(redactSecret(text, key)).toBe(expected);
  });

  it('is linear in the text: a long message against a long key', () => {
    const key = Array.from({ length: 4096 }, (_, i) => String.fromCharCode(33 + ((i * 7919) % 94))).join('');
    const text = 'ordinary words '.repeat(20_000) + key.slice(1000, 1040);
    const started = performance.now();
    const out = redactSecret(text, key);
    expect(out.endsWith('ordinary words [REDACTED]')).toBe(true);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('knows which keys it can redact', () => {
    expect(isRedactableKey('1234567')).toBe(false);
    expect(isRedactableKey('12345678')).toBe(true);
  });
});

describe('answers: only the key is taken out', () => {
  const PROJECT_KEY = `sk-proj-${'Zq8Lw3Rt6Yp1Mn4Bv7Cx0Dk5'.repeat(4)}`;

  it('finds a run of 16 characters of the key starting anywhere in it; ordinary text holds none', () => {
    for (let at = 0; at + 16 <= PROJECT_KEY.length; at++) {
      expect(mayHoldKeyRun(`text ${PROJECT_KEY.slice(at, at + 16)} text`, PROJECT_KEY, 16), `run at ${at}`).toBe(true);
    }
    expect(mayHoldKeyRun('The quick brown fox jumps over the lazy dog.', PROJECT_KEY, 16)).toBe(false);
  });

  it("takes the key's runs out of every string of the answer; its public prefix, keys of other shapes and URLs kept; null when it holds none", () => {
    const json = {
      choices: [
        {
          message: {
            content: `echo Bearer ${PROJECT_KEY}; keys look like sk-proj-XXXX, see sk-exampleexampleexample00 and https://u:pw@host/x`,
          },
        },
      ],
      fp: [PROJECT_KEY.slice(20, 40)],
      n: 3,
    };
    const text = JSON.stringify(json);
    const clean = answerWithoutKey(text, json, PROJECT_KEY);
    expect(clean?.json).toEqual({
      choices: [
        {
          message: {
            content: 'echo Bearer [REDACTED]; keys look like sk-proj-XXXX, see sk-exampleexampleexample00 and https://u:pw@host/x',
          },
        },
      ],
      fp: ['[REDACTED]'],
      n: 3,
    });
    expect(clean?.text).toBe(JSON.stringify(clean?.json));
    // an answer quoting the key's public prefix, and a few characters more, is the model's text
    const plain = { choices: [{ message: { content: `Set OPENAI_API_KEY=${PROJECT_KEY.slice(0, 15)}...` } }] };
    expect(answerWithoutKey(JSON.stringify(plain), plain, PROJECT_KEY)).toBeNull();
    expect(answerWithoutKey(text, json, undefined)).toBeNull();
  });
});

describe('redactUrlCredentials: one owner for URL passwords', () => {
  it.each([
    ['postgres://u:pw@h:5432/db?schema=s', 'postgres://u:***@h:5432/db?schema=s'],
    ['redis://:pw@127.0.0.1:6379', 'redis://:***@127.0.0.1:6379'],
    ['redis://default:pw@127.0.0.1:6379/0', 'redis://default:***@127.0.0.1:6379/0'],
    // An unescaped @ or / in the password: URL parsers take the last @ as the end; so do we.
    ['postgres://u:pw@db-SECRET@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:pa/ss-SECRET@h/db', 'postgres://u:***@h/db'],
    ['postgres://u:pw@h/db?note=a@b', 'postgres://u:***@h/db?note=a@b'],
    ['postgres://postgres@h/db', 'postgres://postgres@h/db'],
    // a password in the query, as pg and ioredis read it
    ['postgres://u@h/db?password=pw-SECRET&schema=s', 'postgres://u@h/db?password=***&schema=s'],
    ['postgres://h/db?sslmode=require&sslpassword=pw-SECRET', 'postgres://h/db?sslmode=require&sslpassword=***'],
    ['redis://127.0.0.1:6379?PASSWORD=pw-SECRET', 'redis://127.0.0.1:6379?PASSWORD=***'],
    ['./llmq.db', './llmq.db'],
    ['https://api.openai.com/v1', 'https://api.openai.com/v1'],
    ['at postgres://a:1@h/x and redis://:2@r:6379: refused', 'at postgres://a:***@h/x and redis://:***@r:6379: refused'],
    ["got 'POSTGRES://u:SECRET@h'", "got 'POSTGRES://u:***@h'"],
    // a quote or bracket inside the password, as commander quotes a refused argument
    ["argument 'https://hook:S3c(r3t@h/x' is invalid", "argument 'https://hook:***@h/x' is invalid"],
    ["argument 'https://hook:it's9@h/x' is invalid", "argument 'https://hook:***@h/x' is invalid"],
    ['(see redis://:p[w]{9}@r:6379)', '(see redis://:***@r:6379)'],
  ])('%s', (text, expected) => {
    expect(redactUrlCredentials(text)).toBe(expected);
    expect(redactLocation(text)).toBe(expected);
  });

  it('tells whether a URL carries a user name or password', () => {
    expect(hasUrlCredentials('http://u:p@h/v1')).toBe(true);
    expect(hasUrlCredentials('http://:p@h/v1')).toBe(true);
    expect(hasUrlCredentials('http://u@h/v1')).toBe(true);
    expect(hasUrlCredentials('http://h/v1')).toBe(false);
    expect(hasUrlCredentials('not a url')).toBe(false);
  });
});

describe('redactUrlQuery', () => {
  it("masks every query value but api-version's and the password of a URL shown whole, and leaves the rest", () => {
    // Azure OpenAI answers 404 without its api-version: a command shown without it would not work
    expect(redactUrlQuery('https://u:pw@llm.internal/v1?api-key=sk-123&api-version=2024-10&api-key=2')).toBe(
      'https://u:***@llm.internal/v1?api-key=***&api-version=2024-10',
    );
    expect(redactUrlQuery('https://llm.internal/v1?sig=abc&version=2')).toBe('https://llm.internal/v1?sig=***&version=***');
    expect(redactUrlQuery('http://127.0.0.1:11434/v1')).toBe('http://127.0.0.1:11434/v1');
    expect(redactUrlQuery('not a url')).toBe('not a url');
  });
});
