/**
 * The benchmark's data set is laid out as imports lay out a school's data: each list's
 * rows stored in the list's order, so a page's rows lie together as they do in a store
 * filled by the importer. And the report judges a run by the targets of its setting.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import SQLite from 'better-sqlite3';
import { ensureDataset, locateDataset } from '../../bench/dataset/load.js';
import { datasetShape } from '../../bench/dataset/shape.js';
import { ratioTarget, SCENARIOS } from '../../bench/scenarios.js';
import { sqlitePath } from '../../src/db/index.js';
import { LIST_TABLES } from '../../src/resources/items.js';

describe('bench: the data set', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'sd-bench-dataset-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it("stores each school's list rows in the list's order", async () => {
    const loc = locateDataset(0.001, root, undefined);
    const built = await ensureDataset(loc, datasetShape(0.001, 1), false);
    assert.ok(built.built);
    const db = new SQLite(sqlitePath(loc), { readonly: true });
    try {
      for (const table of LIST_TABLES) {
        // Within a school, the table's own order (rowid) and the list's (pos) must agree.
        const { rows, disordered } = db
          .prepare(
            `select count(*) as rows, coalesce(sum(pos < previous), 0) as disordered
               from (select pos, lag(pos) over (partition by school_id order by rowid) as previous from ${table})`,
          )
          .get() as { rows: number; disordered: number };
        assert.ok(rows > 0, `${table} has no rows`);
        assert.equal(disordered, 0, `${table}: ${disordered} of ${rows} rows stored out of the list's order`);
      }
    } finally {
      db.close();
    }
  });
});

describe('bench: targets', () => {
  const page = SCENARIOS.find((s) => s.name === 'students-page')!;
  const flood = SCENARIOS.find((s) => s.name === 'unauthorized-flood')!;

  it('judges stored answers on and off by their own ratios', () => {
    assert.equal(ratioTarget(page.targets, 'postgres', 32), 0.7);
    assert.equal(ratioTarget(page.targets, 'sqlite', 32), 0.8);
    assert.equal(ratioTarget(page.targets, 'postgres', 0), 0.2);
    assert.equal(ratioTarget(page.targets, 'sqlite', 0), 0.4);
  });

  it('keeps one ratio for both where a scenario has no separate one', () => {
    assert.equal(ratioTarget(flood.targets, 'postgres', 0), ratioTarget(flood.targets, 'postgres', 32));
  });
});
