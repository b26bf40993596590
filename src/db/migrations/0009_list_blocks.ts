/**
 * Blocks of positions (docs/decisions.md, "Blocks of positions"): a list's `pos` is no
 * longer its rank but a block's first position plus the row's slot in the block, and
 * `list_blocks` holds each block's first position, the rank of its first row and its
 * size. An import rewrites only the blocks it touches and the ranks of the blocks after
 * them; a page turns its offset into a position through this table.
 * Schema only: the rows get their new positions and the table its blocks from the
 * read-model rebuild after the migration (src/importer/rebuild.ts, positions version 2).
 */
import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time, not typed by today's schema
type Db = Kysely<any>;

export async function up(db: Db): Promise<void> {
  await db.schema
    .createTable('list_blocks')
    .addColumn('school_id', 'text', (c) => c.notNull().references('schools.id').onDelete('cascade'))
    .addColumn('list', 'text', (c) => c.notNull())
    .addColumn('first_pos', 'integer', (c) => c.notNull())
    .addColumn('first_rank', 'integer', (c) => c.notNull())
    .addColumn('n', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('list_blocks_pk', ['school_id', 'list', 'first_pos'] as never[])
    .execute();
  // A rank's block is a seek on this index, which also holds what the seek reads.
  await db.schema.createIndex('list_blocks_rank').on('list_blocks').columns(['school_id', 'list', 'first_rank', 'first_pos', 'n']).execute();
}

export async function down(db: Db): Promise<void> {
  await db.schema.dropTable('list_blocks').execute();
}
