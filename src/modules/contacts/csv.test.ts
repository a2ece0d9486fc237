import { describe, expect, it } from 'vitest';
import { parseCsv } from './csv.ts';

describe('parseCsv', () => {
  it('reads quoted fields, escaped quotes, CRLF, blank lines and a BOM', () => {
    expect(parseCsv('\ufeffphone,name\r\n+14155550100,"Doe, Jane"\n\n"+1415555""0101",x\n')).toEqual([
      ['phone', 'name'], ['+14155550100', 'Doe, Jane'], ['+1415555"0101', 'x'],
    ]);
  });
  it('keeps line breaks inside quotes and a last line without a newline', () => {
    expect(parseCsv('a,b\n"1\n2",3')).toEqual([['a', 'b'], ['1\n2', '3']]);
  });
});
