/**
 * Applications for training: most students came in through one (status converted, linked
 * to the student), and others are new, being worked on, or rejected. Every source and
 * every status occurs, however small the school.
 */
import { LEAD_SOURCES } from '../domain/enums.js';
import type { RecordOf } from '../importer/schema.js';
import { clock, pad, timeOn, type Demo } from './context.js';
import { person } from './people.js';
import type { Student } from './students.js';

type Lead = RecordOf<'leads'>;
type Source = Lead['source'];

const SOURCES: Record<Source, number> = { website: 30, phone: 20, referral: 15, social: 12, walk_in: 10, ads: 10, other: 3 };
const OPEN: Record<'new' | 'in_progress' | 'rejected', number> = { new: 25, in_progress: 25, rejected: 50 };

export function makeLeads(demo: Demo, students: Student[]): Lead[] {
  const { random, calendar } = demo;
  const drafts: Omit<Lead, 'id'>[] = [];
  for (const [i, student] of students.entries()) {
    // The first student always came through a lead, so "converted" is never missing.
    if (i > 0 && !random.chance(0.65)) continue;
    const day = Math.max(demo.firstDay, student.enrolledDay - random.int(1, 14));
    drafts.push({
      full_name: student.record.full_name,
      phone: student.record.phone,
      email: random.chance(0.7) ? student.record.email : null,
      category: student.record.category,
      source: random.weighted(SOURCES),
      status: 'converted',
      student_id: student.record.id,
      created_at: timeOn(demo, day, clock(8), clock(22)),
    });
  }
  const open = Math.max(LEAD_SOURCES.length, Math.round(students.length * 0.8));
  const statuses = Object.keys(OPEN) as (keyof typeof OPEN)[];
  for (let n = 0; n < open; n++) {
    // The first few take each source and status in turn; the rest follow the weights.
    const status = n < statuses.length ? statuses[n]! : random.weighted(OPEN);
    const source = n < LEAD_SOURCES.length ? LEAD_SOURCES[n]! : random.weighted(SOURCES);
    // New applications are recent; those in progress a bit older; rejections from any time.
    const age = status === 'new' ? random.int(1, 14) : status === 'in_progress' ? random.int(3, 60) : random.int(1, calendar.today - demo.firstDay);
    const who = person(random);
    drafts.push({
      full_name: who.fullName,
      phone: who.phone,
      email: random.chance(0.5) ? who.email : null,
      category: random.chance(0.12) ? null : random.weighted({ B: 85, A: 9, C: 6 }),
      source,
      status,
      student_id: null,
      created_at: timeOn(demo, calendar.today - age, clock(8), clock(22)),
    });
  }
  drafts.sort((a, b) => a.created_at.localeCompare(b.created_at));
  return drafts.map((lead, i) => ({ id: `ld-${pad(i + 1, 5)}`, ...lead }));
}
