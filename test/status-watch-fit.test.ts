import { expect, it } from 'vitest';
import { fitScreen } from '../src/cli/commands/status.js';
import { stripAnsi } from '../src/report/format.js';

// status --watch redraws in place by moving the cursor up over what it drew: a report taller than
// the terminal reached above the screen's top, and each redraw left a copy in the scrollback.
it('status --watch cuts a report taller than the terminal, says so, and counts the rows it drew', () => {
  const report = `${Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n')}\n`;
  const shown = fitScreen(report, 80, 12, stripAnsi);
  const lines = shown.text.split('\n').slice(0, -1);
  expect(shown.rows).toBe(lines.length);
  expect(shown.rows).toBeLessThan(12);
  expect(lines.slice(0, 2)).toEqual(['line 1', 'line 2']);
  expect(lines.at(-1)).toBe('… 20 more lines: a taller terminal shows them, or llmq status without --watch');
  // lines the terminal wraps take more rows: a 200-character line takes 3 of 80 columns
  const wide = fitScreen(`${'x'.repeat(200)}\nshort\n`, 80, 12, stripAnsi);
  expect(wide).toEqual({ text: `${'x'.repeat(200)}\nshort\n`, rows: 4 });
  // a screen too small for any line: the note alone, one row
  expect(fitScreen(`${'x'.repeat(200)}\n`, 80, 3, stripAnsi).rows).toBe(1);
  expect(fitScreen(`${'x'.repeat(200)}\n`, 80, 3, stripAnsi).text.split('\n')).toHaveLength(2);
  // one that fits is drawn whole
  expect(fitScreen('a\nb\n', 80, 24, stripAnsi)).toEqual({ text: 'a\nb\n', rows: 2 });
});
