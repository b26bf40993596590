/**
 * Money: one contract per student, paid in one to four instalments (the later ones only
 * if their date has come), refunds to students who were expelled, a few payments for
 * extra lessons outside any contract, and the school's monthly expenses in every category.
 */
import { EXPENSE_CATEGORIES } from '../domain/enums.js';
import type { RecordOf } from '../importer/schema.js';
import type { Day } from './calendar.js';
import { clock, money, pad, roundTo, timeOn, type Demo } from './context.js';
import type { Staff } from './staff.js';
import { milestones, type Course, type Student } from './students.js';

type Contract = RecordOf<'contracts'>;
type Payment = RecordOf<'payments'>;
type Expense = RecordOf<'expenses'>;
type Status = Student['record']['status'];
type Method = Payment['method'];

/** Course prices in roubles, in steps of 500. */
const PRICE: Record<Course, [number, number]> = { A: [35_000, 42_000], B: [45_000, 62_000], C: [55_000, 65_000] };

/** The share of the price a student of each status has paid by now, [min, max]. */
const PAID_SHARE: Record<Status, [number, number]> = {
  enrolled: [0, 0.5],
  learning_theory: [0.3, 0.7],
  learning_practice: [0.6, 1],
  internal_exam: [1, 1],
  state_exam: [1, 1],
  graduated: [1, 1],
  expelled: [0.3, 0.6],
  on_hold: [0.3, 0.8],
};

const METHODS: Record<Method, number> = { card: 35, online: 25, cash: 25, bank_transfer: 15 };
const INSTALMENTS = { '1': 30, '2': 35, '3': 25, '4': 10 } as const;

export interface Finances {
  contracts: Contract[];
  payments: Payment[];
}

export function makeFinances(demo: Demo, students: Student[]): Finances {
  const contracts: Contract[] = [];
  const payments: Payment[] = [];
  const nextPaymentId = () => `pm-${pad(payments.length + 1, 5)}`;
  for (const [i, student] of students.entries()) {
    const contract = makeContract(demo, student, i + 1);
    contracts.push(contract);
    for (const payment of instalments(demo, student, contract)) payments.push({ ...payment, id: nextPaymentId() });
  }
  for (const payment of extraLessons(demo, students)) payments.push({ ...payment, id: nextPaymentId() });
  return { contracts, payments };
}

function makeContract(demo: Demo, student: Student, seq: number): Contract {
  const [min, max] = PRICE[student.group.course];
  const signedOn = demo.calendar.date(student.enrolledDay);
  const { status } = student.record;
  return {
    id: `ct-${pad(seq, 4)}`,
    number: `ДОГ-${signedOn.slice(0, 4)}-${pad(seq, 4)}`,
    student_id: student.record.id,
    category: student.record.category,
    status: status === 'graduated' ? 'completed' : status === 'expelled' ? 'terminated' : 'active',
    signed_on: signedOn,
    price: money(roundTo(demo.random.int(min, max), 500)),
    currency: demo.currency,
    created_at: student.record.created_at,
  };
}

type Draft = Omit<Payment, 'id'>;

interface PaymentOf {
  contractId: string | null;
  kind: Payment['kind'];
  /** Roubles. */
  amount: number;
  paidAt: string;
  /** Default: drawn from METHODS. */
  method?: Method;
}

function payment(demo: Demo, student: Student, { contractId, kind, amount, paidAt, method }: PaymentOf): Draft {
  return {
    student_id: student.record.id,
    contract_id: contractId,
    kind,
    method: method ?? demo.random.weighted(METHODS),
    amount: money(amount),
    currency: demo.currency,
    paid_at: paidAt,
    created_at: paidAt,
  };
}

/** The first instalment on the day of signing, the others a month apart, while their day has come. */
function instalments(demo: Demo, student: Student, contract: Contract): Draft[] {
  const { random, calendar } = demo;
  const [low, high] = PAID_SHARE[student.record.status];
  const price = Number(contract.price);
  const total = roundTo(price * (low + random.next() * (high - low)), 100);
  const parts = Number(random.weighted(INSTALMENTS));
  const drafts: Draft[] = [];
  let paid = 0;
  for (let n = 0; n < parts && paid < total; n++) {
    const day = student.enrolledDay + 30 * n;
    if (day >= calendar.today) break;
    const amount = n === parts - 1 ? total - paid : Math.min(total - paid, Math.max(100, roundTo(total / parts, 100)));
    // The first instalment is paid at the desk right after signing.
    const paidAt = n === 0 ? calendar.timestamp(Date.parse(student.record.created_at) + random.int(5, 40) * 60_000) : timeOn(demo, day, clock(9), clock(20));
    drafts.push(payment(demo, student, { contractId: contract.id, kind: 'payment', amount, paidAt }));
    paid += amount;
  }
  if (student.record.status === 'expelled' && paid > 0) {
    // Unused lessons are refunded, usually to the card or account the money came from.
    const refundDay = Math.min(calendar.today - 1, student.enrolledDay + 30 * drafts.length + random.int(3, 20));
    const refund = Math.min(paid, Math.max(100, roundTo(paid * (0.3 + random.next() * 0.3), 100)));
    const paidAt = timeOn(demo, refundDay, clock(10), clock(18));
    drafts.push(payment(demo, student, { contractId: contract.id, kind: 'refund', amount: refund, paidAt, method: 'bank_transfer' }));
  }
  return drafts;
}

/** Extra driving lessons bought on top of the course: paid, but outside any contract. */
function extraLessons(demo: Demo, students: Student[]): Draft[] {
  const { random, calendar } = demo;
  const practising = students.filter((s) => s.instructor && milestones(s).practice < calendar.today - 7);
  const buyers = random.sample(practising, Math.max(1, Math.round(practising.length * 0.06)));
  return buyers.flatMap((student) =>
    Array.from({ length: random.int(1, 2) }, () => {
      const day = random.int(milestones(student).practice, calendar.today - 1);
      const amount = roundTo(random.int(1_800, 2_600), 100);
      return payment(demo, student, { contractId: null, kind: 'payment', amount, paidAt: timeOn(demo, day, clock(9), clock(20)), method: random.pick(['card', 'cash', 'online'] as const) });
    }),
  );
}

/** What a month's expenses depend on. Amounts are in roubles for a school of 300 students. */
interface Costs {
  demo: Demo;
  branches: RecordOf<'branches'>[];
  staff: Staff;
  /** Size of the school relative to 300 students (never below 0.4: a small school still pays rent). */
  scale: number;
  /** Monthly rent of each branch: the same every month. */
  rent: Map<string, number>;
}

type Spending = [amount: number, comment: string];

const varying = (costs: Costs, min: number, max: number, comments: readonly string[]): Spending[] => [
  [costs.demo.random.int(min, max) * costs.scale, costs.demo.random.pick(comments)],
];

/** The expenses of each category in one month. Salaries and rent are per branch, fuel per vehicle in service. */
const MONTHLY: Record<Expense['category'], (costs: Costs) => Spending[]> = {
  salary: ({ demo, branches, staff }) =>
    branches.map((b) => [Math.max(1, activeStaffIn(staff, b.id)) * demo.random.int(26_000, 34_000), `Заработная плата инструкторов и преподавателей (${b.name})`]),
  rent: ({ branches, rent }) => branches.map((b) => [rent.get(b.id)!, `Аренда помещения (${b.name})`]),
  fuel: ({ demo, staff }) => [
    [staff.vehicles.filter((v) => v.status !== 'decommissioned').length * demo.random.int(4_500, 7_500), demo.random.pick(['Топливо по топливным картам', 'ГСМ для учебных автомобилей'])],
  ],
  repair: (c) => varying(c, 8_000, 60_000, ['Замена тормозных колодок', 'ТО учебного автомобиля', 'Шиномонтаж', 'Ремонт сцепления', 'Замена масла и фильтров']),
  insurance: (c) => varying(c, 4_000, 15_000, ['ОСАГО учебного автомобиля', 'Страхование автодрома']),
  marketing: (c) => varying(c, 15_000, 45_000, ['Яндекс Директ', 'Реклама ВКонтакте', 'Листовки и баннеры']),
  utilities: (c) => varying(c, 12_000, 25_000, ['Коммунальные услуги и интернет']),
  taxes: (c) => varying(c, 30_000, 60_000, ['УСН 6%, авансовый платёж', 'Страховые взносы']),
  other: (c) => varying(c, 3_000, 15_000, ['Канцелярия', 'Вода и кофе для учеников', 'Обслуживание сайта']),
};

function activeStaffIn(staff: Staff, branchId: string): number {
  return staff.instructors.filter((i) => i.record.is_active && i.record.branch_id === branchId).length;
}

/** A calendar month of data: its first day and how many of its days have passed. */
type Month = { first: Day; days: number };

/** The last twelve calendar months: the current one up to yesterday and the eleven before it (the twelve before it on the 1st). */
function lastTwelveMonths(demo: Demo): Month[] {
  const { calendar } = demo;
  const [year, month, dayOfMonth] = calendar.ymd(calendar.today);
  const newest = dayOfMonth > 1 ? 0 : 1;
  const months: Month[] = [];
  for (let back = newest + 11; back >= newest; back--) {
    const days = back === 0 ? dayOfMonth - 1 : new Date(Date.UTC(year, month - back, 0)).getUTCDate();
    months.push({ first: Date.UTC(year, month - 1 - back, 1) / 86_400_000, days });
  }
  return months;
}

/** Every expense category in every one of the last twelve months. */
export function makeExpenses(demo: Demo, branches: RecordOf<'branches'>[], staff: Staff, students: number): Expense[] {
  const { random, calendar } = demo;
  const costs: Costs = { demo, branches, staff, scale: Math.max(0.4, students / 300), rent: new Map(branches.map((b) => [b.id, roundTo(random.int(40_000, 80_000), 1_000)])) };
  const expenses: Expense[] = [];
  for (const { first, days } of lastTwelveMonths(demo)) {
    const yyyymm = calendar.date(first).slice(0, 7).replace('-', '');
    for (const category of EXPENSE_CATEGORIES) {
      for (const [n, [amount, comment]] of MONTHLY[category](costs).entries()) {
        const day: Day = first + Math.min(days, random.int(1, 28)) - 1;
        expenses.push({
          id: `ex-${yyyymm}-${category}-${n + 1}`,
          category,
          amount: money(roundTo(amount, 100)),
          currency: demo.currency,
          spent_at: timeOn(demo, day, clock(10), clock(17)),
          comment,
        });
      }
    }
  }
  return expenses;
}
