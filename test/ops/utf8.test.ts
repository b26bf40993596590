/**
 * A body made as text is sent as its UTF-8 bytes (src/edge/answer.ts, `utf8`): the same
 * bytes Buffer.from makes, whatever the text holds (Latin-1 or wider, long or short, a
 * lone surrogate), and each call's bytes its own.
 * @store-free
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { utf8 } from '../../src/edge/answer.js';

describe('a text body as UTF-8', () => {
  it('is the bytes Buffer.from makes, for text of any script', () => {
    const samples = [
      '',
      '{"items":[]}',
      '{"full_name":"Покровский Александр Александрович","email":"a@b.ru"}',
      'naïve café',
      'emoji 🚗 and CJK 運転',
      'a lone surrogate \ud800 and \udc00',
      'Ж'.repeat(300_000),
    ];
    for (const text of samples) assert.deepEqual(utf8(text), Buffer.from(text), text.slice(0, 40));
    fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 2000 }), (text) => utf8(text).equals(Buffer.from(text))));
  });

  it('gives each call bytes of its own: a longer body encoded later does not change a shorter one before it', () => {
    const first = utf8('Иванов');
    const second = utf8('Петрова Анна Сергеевна, ул. Ленина');
    const third = utf8('ok');
    assert.equal(first.toString(), 'Иванов');
    assert.equal(second.toString(), 'Петрова Анна Сергеевна, ул. Ленина');
    assert.equal(third.toString(), 'ok');
  });
});
