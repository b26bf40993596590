/**
 * The cabinet's form bodies read strictly: what a browser sends is read as it meant it, and
 * anything else (a malformed escape, escapes or bytes that are no UTF-8 text) is refused.
 * @store-free
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formField, formTicked, MalformedForm, parseForm } from '../../src/cabinet/form.js';

const parse = (text: string) => parseForm(Buffer.from(text, 'utf8'));

describe('cabinet form bodies', () => {
  it('reads what a browser encodes: spaces as +, escapes, UTF-8 text, fields without a value', () => {
    const sent = new URLSearchParams({ name: 'Ключ для 1С + BI', note: '100% & more', empty: '' }).toString();
    const form = parse(`${sent}&scope_students`);
    assert.equal(formField(form, 'name'), 'Ключ для 1С + BI');
    assert.equal(formField(form, 'note'), '100% & more');
    assert.equal(formField(form, 'empty'), '');
    assert.ok(formTicked(form, 'scope_students'));
    assert.equal(formField(form, 'missing'), null);
  });

  it('keeps a repeated field as a list, which reads as absent, and skips empty pairs', () => {
    const form = parse('&name=a&&name=b&name=c&');
    assert.deepEqual(form.name, ['a', 'b', 'c']);
    assert.equal(formField(form, 'name'), null);
    assert.ok(formTicked(form, 'name'));
    // A body of one name repeated to the size limit: every value kept, in order.
    const many = parse('a&'.repeat(4096));
    assert.equal((many.a as string[]).length, 4096);
  });

  it('has no prototype: __proto__ and constructor are fields like any other', () => {
    const form = parse('__proto__=x&constructor=y&hasOwnProperty=z');
    assert.equal(formField(form, '__proto__'), 'x');
    assert.equal(formField(form, 'constructor'), 'y');
    assert.equal(formField(form, 'hasOwnProperty'), 'z');
    assert.equal(formField(parse('a=1'), 'toString'), null);
  });

  it('refuses a % without two hex digits, escapes that are not UTF-8, and bytes that are not', () => {
    for (const text of ['name=%', 'name=100%', 'name=%zz', 'name=%E0%A4%A', 'name=%FF%FE', 'na%C3me=x', 'name=%ED%A0%80']) {
      assert.throws(() => parse(text), MalformedForm, text);
    }
    assert.throws(() => parseForm(Buffer.from([0x6e, 0x3d, 0xff, 0xfe])), MalformedForm);
    assert.equal(new MalformedForm().statusCode, 400);
  });
});
