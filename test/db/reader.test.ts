/**
 * The API's read path (src/db/reader.ts). On SQLite the reads of one turn of the event
 * loop share one read transaction: they see one snapshot, and what commits during the
 * turn is seen from the next turn on, never later. On PostgreSQL each read is its own.
 * SQLite's statements take their parameters as `+?` (planned without their values) and
 * answer exactly as with `?`. PostgreSQL's connections plan each statement once.
 */
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { randomBytes } from 'node:crypto';
import SQLite from 'better-sqlite3';
import { prepared, sqlitePath, type Reader } from '../../src/db/index.js';
import { batchedText, opaqueParameters } from '../../src/db/reader.js';
import { createSchool } from '../../src/management/schools.js';
import { createTestStore, type TestStore } from '../helpers/store.js';

describe('the read path', () => {
  let store: TestStore;
  let schoolId: string;
  const planOf = () => {
    const compiled = store.reads.db.selectFrom('schools').select('plan').where('id', '=', schoolId).compile();
    return store.reads.run<{ plan: string }>(compiled.sql, compiled.parameters);
  };
  const setPlan = (plan: string) => store.db.updateTable('schools').set({ plan }).where('id', '=', schoolId).execute();

  /** Warnings the process emitted while these tests ran (pg's deprecations among them). */
  const warnings: Error[] = [];
  const noteWarning = (warning: Error) => warnings.push(warning);

  before(async () => {
    process.on('warning', noteWarning);
    store = await createTestStore();
    const created = await createSchool(store.db, { name: 'Reader', plan: 'Profi', id: `rd_${randomBytes(5).toString('hex')}` });
    assert.ok(created.ok);
    schoolId = created.value.id;
  });
  after(async () => {
    process.off('warning', noteWarning);
    await store.close();
  });

  it('sees in the next turn what committed in this one', async () => {
    assert.equal((await planOf())[0]?.plan, 'Profi');
    await setPlan('VIP');
    await nextTurn();
    assert.equal((await planOf())[0]?.plan, 'VIP');
  });

  it('reads one snapshot within a turn on SQLite, and ends its transaction with the turn', { skip: process.env.DATABASE_URL ? 'SQLite only' : false }, async () => {
    await nextTurn();
    const first = planOf();
    assert.ok(Array.isArray(first), 'SQLite answers at once');
    // Another connection (as another process would) commits while this turn goes on:
    // better-sqlite3 is synchronous, so the commit is done before the turn ends.
    const other = new SQLite(sqlitePath({ dataDir: store.dataDir }));
    try {
      other.prepare('update schools set plan = ? where id = ?').run('Standart', schoolId);
    } finally {
      other.close();
    }
    assert.equal((planOf() as { plan: string }[])[0]?.plan, first[0]?.plan, 'the same snapshot within the turn');
    await nextTurn();
    assert.equal((await planOf())[0]?.plan, 'Standart');
  });

  it('plans each statement once on a PostgreSQL connection: its generic plan, on every connection of the pool', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, async () => {
    // Ten reads at once open as many of the pool's connections as it allows; each answers with the setting.
    const modes = await Promise.all(Array.from({ length: 10 }, async () => store.reads.run<{ mode: string }>("select current_setting('plan_cache_mode') as mode", [])));
    assert.deepEqual(new Set(modes.map((rows) => rows[0]?.mode)), new Set(['force_generic_plan']));
  });

  it('never sends a query on a pool connection while another runs there (pg 9 refuses it)', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, () => {
    // The pool's connections opened above (the store's first write, ten reads at once) each
    // had their setting sent before their first query.
    assert.deepEqual(warnings.map((w) => w.message).filter((m) => m.includes('already executing a query')), []);
  });
});

describe('parameters SQLite plans without their values', () => {
  it('writes each parameter +?, and no question mark in quoted text, names or comments', () => {
    assert.equal(opaqueParameters('select a from t where b = ? and c in (?, ?) limit ? + 0'), 'select a from t where b = +? and c in (+?, +?) limit +? + 0');
    assert.equal(opaqueParameters(`select 'why?', 'it''s ?', "col?", [x?], \`y?\` from t where a = ?`), `select 'why?', 'it''s ?', "col?", [x?], \`y?\` from t where a = +?`);
    assert.equal(opaqueParameters('select 1 -- a ? here\nwhere a = ? /* and ? */ and b = ?'), 'select 1 -- a ? here\nwhere a = +? /* and ? */ and b = +?');
    assert.equal(opaqueParameters("select 'unclosed ?"), "select 'unclosed ?");
  });

  it('answers as ? does: the column affinity applies to the value, an index is used', () => {
    const db = new SQLite(':memory:');
    try {
      db.exec("create table t (id text primary key, n integer, k text); create index t_n on t (n, id); insert into t values ('5', 5, 'a'), ('6', 6, 'b'), ('x', 7, 'c')");
      for (const [query, values] of [
        ['select k from t where id = ?', [5]],
        ['select k from t where n = ?', ['6']],
        ['select k from t where n >= ? order by n limit ?', [6, 1]],
        ['select k from t where id in (?, ?) order by id', ['x', 5]],
        ['select count(*) as k from t where k like ?', ['%']],
      ] as const) {
        assert.deepEqual(db.prepare(opaqueParameters(query)).all(values), db.prepare(query).all(values), query);
      }
      const plan = db.prepare(`explain query plan ${opaqueParameters('select id from t where n = ? order by id')}`).all(6) as { detail: string }[];
      assert.match(plan.map((r) => r.detail).join('\n'), /USING COVERING INDEX t_n \(n=\?\)/);
    } finally {
      db.close();
    }
  });
});

describe('the reads of one turn on PostgreSQL', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, () => {
  let store: TestStore;
  before(async () => {
    store = await createTestStore();
  });
  after(() => store.close());

  const read = (text: string, values: readonly unknown[]) => Promise.resolve(store.reads.run<Record<string, unknown>>(text, values));

  it('go out as one statement when they run the same one, each read getting its own rows in order', async () => {
    // A statement is known by its start and its backend: the same in every row it returns.
    const text = "select statement_timestamp()::text || '/' || pg_backend_pid() as statement, g as n, $1::text as word from generate_series(1, $2::int) as g order by g desc";
    const values = Array.from({ length: 10 }, (_, i) => [`w${i}`, i % 4] as const);
    const answers = await Promise.all(values.map((v) => read(text, v)));
    answers.forEach((rows, i) => {
      const [word, n] = values[i]!;
      assert.deepEqual(rows.map((r) => [r.n, r.word]), Array.from({ length: n }, (_, j) => [n - j, word]), `read ${i}`);
    });
    assert.equal(new Set(answers.flat().map((r) => r.statement)).size, 1);
  });

  it('go out in batches of ten at most, their sizes one apart at most, side by side', async () => {
    const text = "select statement_timestamp()::text || '/' || pg_backend_pid() as statement, pg_backend_pid() as backend, $1::int as i";
    for (const [reads, sizes] of [[41, [8, 8, 8, 8, 9]], [24, [8, 8, 8]], [11, [5, 6]], [10, [10]]] as const) {
      const answers = await Promise.all(Array.from({ length: reads }, (_, i) => read(text, [i])));
      assert.deepEqual(answers.map((rows) => rows.map((r) => r.i)), Array.from({ length: reads }, (_, i) => [i]));
      const readsOf = new Map<unknown, number>();
      for (const [row] of answers) readsOf.set(row!.statement, (readsOf.get(row!.statement) ?? 0) + 1);
      assert.deepEqual([...readsOf.values()].sort((a, b) => a - b), sizes, `${reads} reads`);
      // Side by side: each batch on a backend of its own, as far as the test store's pool (4 connections) goes.
      assert.equal(new Set(answers.map(([row]) => row!.backend)).size, Math.min(sizes.length, 4), `${reads} reads`);
    }
  });

  it('keep reads whose values differ in type apart, and take text, integers, fractions and booleans', async () => {
    const text = "select ($1::text) || '!' as v";
    const values = ['a', 'b', 7, 8, 2.5, true, false];
    const answers = await Promise.all(values.map((v) => read(text, [v])));
    assert.deepEqual(answers.map((rows) => rows[0]?.v), ['a!', 'b!', '7!', '8!', '2.5!', 'true!', 'false!']);
  });

  it('fail only the read PostgreSQL refuses, not the others of its turn', async () => {
    const text = 'select cast($1::text as integer) as n';
    const answers = await Promise.allSettled([read(text, ['1']), read(text, ['not a number']), read(text, ['3'])]);
    assert.deepEqual(answers.map((a) => a.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.deepEqual(answers.map((a) => (a.status === 'fulfilled' ? a.value[0]?.n : null)), [1, null, 3]);
  });
});

describe('the statement that answers many reads', () => {
  it('reads each parameter from its column, leaving quoted text and names as they are', () => {
    assert.equal(
      batchedText(`select '$1', "$2" from t where a = $1 and b < $2 + $10`, ['text[]', 'int8[]']),
      `select "batch"."__school_data_read", "read".* from unnest($1::text[], $2::int8[]) with ordinality as "batch"("p1", "p2", "__school_data_read") cross join lateral (select '$1', "$2" from t where a = "batch"."p1" and b < "batch"."p2" + "batch"."p10") as "read"`,
    );
  });
});

describe('a query compiled once per shape (prepared)', () => {
  let store: TestStore;
  let schoolId: string;
  before(async () => {
    store = await createTestStore();
    const created = await createSchool(store.db, { name: 'Prepared', plan: 'Profi', id: `pp_${randomBytes(5).toString('hex')}` });
    assert.ok(created.ok);
    schoolId = created.value.id;
  });
  after(() => store.close());

  // The school's id twice (with a name) and its name once, beside a constant of the query ('Nope').
  const schoolOf = prepared((db, q: { id: string; name: string | undefined }) => {
    let query = db.selectFrom('schools').select(['id', 'plan']).where('id', '=', q.id).where('plan', '!=', 'Nope');
    if (q.name !== undefined) query = query.where((eb) => eb.or([eb('name', '=', q.name!), eb('id', '=', q.id)]));
    return query;
  });

  it('sends a value used in several places once on PostgreSQL, each in its place on SQLite, and answers the same', async () => {
    const sent: { sql: string; parameters: readonly unknown[] }[] = [];
    const watched: Reader = { ...store.reads, db: store.reads.db, dialect: store.reads.dialect, run: (sql, parameters) => (sent.push({ sql, parameters }), store.reads.run(sql, parameters)), close: () => Promise.resolve() };
    for (const name of ['Prepared', 'Other', undefined]) {
      sent.length = 0;
      assert.deepEqual(await schoolOf(watched, { id: schoolId, name }), [{ id: schoolId, plan: 'Profi' }], String(name));
      const [{ sql, parameters }] = sent as [(typeof sent)[0]];
      if (store.reads.dialect === 'postgres') {
        assert.deepEqual(parameters, name === undefined ? [schoolId, 'Nope'] : [schoolId, 'Nope', name]);
        assert.equal(sql.match(/\$1\b/g)?.length, name === undefined ? 1 : 2, sql);
      } else {
        assert.deepEqual(parameters, name === undefined ? [schoolId, 'Nope'] : [schoolId, 'Nope', name, schoolId]);
      }
    }
    assert.deepEqual(await schoolOf(watched, { id: 'no-such-school', name: 'Prepared' }), []);
    // Reads of one turn (one statement on PostgreSQL, the value once in its batch): each its own answer.
    const ids = [schoolId, 'no-such-school', schoolId, 'another-missing'];
    const answers = await Promise.all(ids.map(async (id) => schoolOf(store.reads, { id, name: 'Prepared' })));
    assert.deepEqual(answers, ids.map((id) => (id === schoolId ? [{ id: schoolId, plan: 'Profi' }] : [])));
  });
});
