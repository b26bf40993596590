/**
 * The school's branches, instructors and training vehicles. Each driving instructor has
 * a car (or a motorcycle, or a truck) of their own; theory teachers have none. The fleet
 * has the paperwork an operator watches: a few insurance policies and inspections run
 * out within 30 days, one policy has already expired, some vehicles are in repair.
 */
import type { RecordOf } from '../importer/schema.js';
import type { Day } from './calendar.js';
import { clock, pad, timeOn, type Demo } from './context.js';
import { person } from './people.js';

type Branch = RecordOf<'branches'>;
type InstructorRecord = RecordOf<'instructors'>;
type Vehicle = RecordOf<'vehicles'>;

export type Speciality = 'theory' | 'A' | 'B' | 'C';

export interface Instructor {
  record: InstructorRecord;
  speciality: Speciality;
  vehicle: Vehicle | null;
}

export interface Staff {
  instructors: Instructor[];
  vehicles: Vehicle[];
}

const BRANCH_NAMES = ['Центральный филиал', 'Северный филиал', 'Филиал «Заречье»'];

type Model = readonly [brand: string, model: string];
const CARS_MANUAL: readonly Model[] = [['Lada', 'Vesta'], ['Lada', 'Granta'], ['Kia', 'Rio'], ['Hyundai', 'Solaris'], ['Volkswagen', 'Polo'], ['Skoda', 'Rapid'], ['Renault', 'Logan']];
const CARS_AUTOMATIC: readonly Model[] = [['Kia', 'Rio'], ['Hyundai', 'Solaris'], ['Haval', 'Jolion'], ['Chery', 'Tiggo 4'], ['Volkswagen', 'Polo']];
const MOTORCYCLES: readonly Model[] = [['Honda', 'CB400'], ['Yamaha', 'YBR125'], ['Suzuki', 'GN125']];
const TRUCKS: readonly Model[] = [['КАМАЗ', '4308'], ['ГАЗ', 'ГАЗон Next'], ['МАЗ', '4371']];

/** The Cyrillic letters that Russian plates use (those that look like Latin ones). */
const PLATE_LETTERS = 'АВЕКМНОРСТУХ';
const POLICY_SERIES = ['ХХХ', 'ТТТ', 'ААС', 'ААВ'];

export function makeBranches(demo: Demo, students: number): Branch[] {
  const count = students >= 100 && demo.random.chance(0.6) ? 3 : 2;
  return BRANCH_NAMES.slice(0, count).map((name, i) => ({ id: `br-${i + 1}`, name }));
}

/** About one instructor per 25 students, within 8-20. */
function specialities(students: number, branches: number): Speciality[] {
  const total = Math.min(20, Math.max(8, Math.round(students / 25)));
  const theory = Array.from({ length: branches - 1 }, (): Speciality => 'theory');
  const fixed: Speciality[] = [...theory, 'A', 'C'];
  return [...fixed, ...Array.from({ length: total - fixed.length }, (): Speciality => 'B')];
}

const CATEGORIES_BY_SPECIALITY: Record<Speciality, InstructorRecord['categories'][]> = {
  theory: [['A', 'B', 'C']],
  A: [['A', 'A1', 'B']],
  B: [['B'], ['B'], ['B'], ['B', 'BE']],
  C: [['B', 'C', 'CE']],
};

export function makeStaff(demo: Demo, branches: Branch[], students: number): Staff {
  const { random } = demo;
  const kinds = specialities(students, branches.length);
  const leaver = kinds.lastIndexOf('B');
  const instructors: Instructor[] = [];
  const vehicles: Vehicle[] = [];
  for (const [i, speciality] of kinds.entries()) {
    const record = makeInstructor(demo, i, speciality, branchOf(speciality, i, branches), { active: i !== leaver, newcomer: i === leaver - 1 });
    let vehicle: Vehicle | null = null;
    if (speciality !== 'theory') {
      // Roughly a third of the cars are automatic: the "AT" licence restriction is popular.
      const automatic = speciality === 'B' && record.is_active && (!vehicles.some((v) => v.transmission === 'automatic') || random.chance(0.3));
      vehicle = makeVehicle(demo, `veh-${pad(vehicles.length + 1, 2)}`, speciality, automatic, record.branch_id!, record.created_at);
      vehicles.push(vehicle);
      if (record.is_active) {
        vehicle.instructor_id = record.id;
        record.vehicle_id = vehicle.id;
      } else {
        // The instructor who left: their old car went out of service.
        vehicle.status = 'decommissioned';
        vehicle.year = Math.min(vehicle.year, yearOf(demo) - 9);
        vehicle = null;
      }
    }
    instructors.push({ record, speciality, vehicle });
  }
  const spare = makeVehicle(demo, `veh-${pad(vehicles.length + 1, 2)}`, 'B', false, branches[0]!.id, timeOn(demo, demo.firstDay + random.int(10, 120), clock(10), clock(17)));
  spare.status = 'repair';
  vehicles.push(spare);
  random.pick(vehicles.filter((v) => v.instructor_id && v.category === 'B')).status = 'repair';
  setPaperwork(demo, vehicles);
  return { instructors, vehicles };
}

/** Theory teachers work in their own branch; motorcycle and truck training happen at the main one. */
function branchOf(speciality: Speciality, i: number, branches: Branch[]): Branch {
  if (speciality === 'theory') return branches[(i + 1) % branches.length]!;
  return speciality === 'B' ? branches[i % branches.length]! : branches[0]!;
}

function makeInstructor(demo: Demo, i: number, speciality: Speciality, branch: Branch, role: { active: boolean; newcomer: boolean }): InstructorRecord {
  const { random, calendar, firstDay } = demo;
  const who = person(random);
  // Most staff were on the books before the year of data; one joined during it.
  const hiredDay = role.newcomer ? firstDay + random.int(60, 200) : firstDay - random.int(365, 12 * 365);
  return {
    id: `in-${pad(i + 1, 2)}`,
    full_name: who.fullName,
    phone: who.phone,
    email: random.chance(0.8) ? who.email : null,
    categories: [...random.pick(CATEGORIES_BY_SPECIALITY[speciality])],
    is_active: role.active,
    branch_id: branch.id,
    vehicle_id: null,
    // One record without a hiring date, as real data has.
    hired_on: i === 1 ? null : calendar.date(hiredDay),
    created_at: timeOn(demo, role.newcomer ? hiredDay : firstDay - random.int(5, 40), clock(10), clock(17)),
  };
}

function yearOf(demo: Demo): number {
  return demo.calendar.ymd(demo.calendar.today)[0];
}

function makeVehicle(demo: Demo, id: string, speciality: Exclude<Speciality, 'theory'>, automatic: boolean, branchId: string, createdAt: string): Vehicle {
  const { random } = demo;
  const category = speciality;
  const [brand, model] = random.pick(category === 'A' ? MOTORCYCLES : category === 'C' ? TRUCKS : automatic ? CARS_AUTOMATIC : CARS_MANUAL);
  return {
    id,
    plate_number: plate(demo, category === 'A'),
    brand,
    model,
    // Bought no later than the school registered it.
    year: Number(createdAt.slice(0, 4)) - random.int(category === 'C' ? 2 : 0, category === 'B' ? 7 : 12),
    category,
    transmission: automatic ? 'automatic' : 'manual',
    status: 'active',
    instructor_id: null,
    branch_id: branchId,
    insurance_policy_number: null,
    insurance_valid_from: null,
    insurance_valid_until: null,
    inspection_valid_until: null,
    created_at: createdAt,
  };
}

function plate(demo: Demo, motorcycle: boolean): string {
  const { random } = demo;
  const letter = () => random.pick([...PLATE_LETTERS]);
  const region = random.pick(demo.regions);
  return motorcycle
    ? `${pad(random.int(1, 9999), 4)}${letter()}${letter()}${region}`
    : `${letter()}${pad(random.int(1, 999), 3)}${letter()}${letter()}${region}`;
}

/**
 * Insurance (a one-year policy) and technical inspection dates. Decommissioned vehicles
 * have none; among the others, one policy has expired, two run out within 30 days, and
 * two inspections are due within 30 days.
 */
function setPaperwork(demo: Demo, vehicles: Vehicle[]): void {
  const { random, calendar } = demo;
  const today = calendar.today;
  const inService = random.sample(
    vehicles.filter((v) => v.status !== 'decommissioned'),
    vehicles.length,
  );
  for (const [rank, vehicle] of inService.entries()) {
    const insuranceEnds: Day = rank === 0 ? today - random.int(3, 20) : rank <= 2 ? today + random.int(5, 28) : today + random.int(35, 350);
    vehicle.insurance_policy_number = `${random.pick(POLICY_SERIES)} ${pad(random.int(0, 9_999_999_999), 10)}`;
    vehicle.insurance_valid_from = calendar.date(insuranceEnds - 364);
    vehicle.insurance_valid_until = calendar.date(insuranceEnds);
    // Training vehicles are inspected every six months.
    const inspectionDue: Day = rank === 3 || rank === 4 ? today + random.int(3, 27) : today + random.int(35, 180);
    vehicle.inspection_valid_until = calendar.date(inspectionDue);
  }
}
