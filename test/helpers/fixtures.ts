/**
 * A small, hand-checked data set in the import format. Two schools get the same
 * ids with different contents, so any leak between tenants shows in the values.
 * Times are chosen around period edges in Europe/Moscow (UTC+3, no DST):
 * 2026-03-31T20:59:00Z is 23:59 local on 31 March; 2026-03-31T21:00:00Z is 00:00 on 1 April.
 */
export const TZ = 'Europe/Moscow';

export function schoolData(tag: string): Record<string, unknown[]> {
  const name = (n: string) => `${n} ${tag}`;
  return {
    branches: [
      { id: 'br1', name: name('Центр') },
      { id: 'br2', name: name('Север') },
    ],
    groups: [
      { id: 'g1', name: name('B-01'), category: 'B', branch_id: 'br1' },
      { id: 'g2', name: name('A-01'), category: 'A', branch_id: null },
    ],
    students: [
      { id: 's1', full_name: name('Иванов Иван'), phone: '+79990000001', email: 's1@example.ru', category: 'B', status: 'learning_practice', group_id: 'g1', branch_id: 'br1', created_at: '2026-01-10T09:00:00Z', birth_date: '2000-05-01', instructor_id: 'i1', transmission: 'manual' },
      { id: 's2', full_name: name('Петрова Анна'), phone: '+79990000002', email: 's2@example.ru', category: 'B', status: 'learning_theory', group_id: 'g1', branch_id: null, created_at: '2026-01-11T09:00:00Z' },
      { id: 's3', full_name: name('Сидоров Пётр'), phone: '+79990000003', email: 's3@example.ru', category: 'A', status: 'learning_practice', group_id: 'g2', branch_id: 'br2', created_at: '2026-01-12T09:00:00Z' },
      // s4 and s5 share a created_at: the order falls back to id.
      { id: 's5', full_name: name('Кузнецова Мария'), phone: '+79990000005', email: 's5@example.ru', category: 'B', status: 'graduated', group_id: 'g1', branch_id: 'br1', created_at: '2026-01-13T09:00:00Z' },
      { id: 's4', full_name: name('Смирнов Олег'), phone: '+79990000004', email: 's4@example.ru', category: 'C', status: 'enrolled', group_id: 'g1', branch_id: 'br1', created_at: '2026-01-13T09:00:00Z' },
    ],
    instructors: [
      { id: 'i1', full_name: name('Орлов Сергей'), phone: '+79991110001', email: 'orlov@example.ru', categories: ['B', 'C'], is_active: true, branch_id: 'br1', vehicle_id: 'v1', hired_on: '2020-02-03', created_at: '2025-12-01T08:00:00Z' },
      { id: 'i2', full_name: name('Волков Дмитрий'), phone: '+79991110002', email: null, categories: ['A'], is_active: false, branch_id: null, vehicle_id: null, hired_on: null, created_at: '2025-12-02T08:00:00Z' },
    ],
    vehicles: [
      { id: 'v1', plate_number: 'А123ВС77', brand: 'Lada', model: 'Vesta', year: 2022, category: 'B', transmission: 'manual', status: 'active', instructor_id: 'i1', branch_id: 'br1', insurance_policy_number: 'XXX0123456789', insurance_valid_from: '2026-01-01', insurance_valid_until: '2026-12-31', inspection_valid_until: '2027-01-15', created_at: '2025-11-01T08:00:00Z' },
      { id: 'v2', plate_number: 'В456ОР77', brand: 'Honda', model: 'CB500', year: 2019, category: 'A', transmission: 'manual', status: 'repair', instructor_id: null, branch_id: null, insurance_policy_number: null, insurance_valid_from: null, insurance_valid_until: null, inspection_valid_until: null, created_at: '2025-11-02T08:00:00Z' },
    ],
    lessons: [
      { id: 'l1', type: 'driving', status: 'completed', starts_at: '2026-03-01T06:00:00Z', ends_at: '2026-03-01T07:30:00Z', instructor_id: 'i1', student_id: 's1', group_id: null, vehicle_id: 'v1', branch_id: 'br1', created_at: '2026-02-20T10:00:00Z' },
      { id: 'l2', type: 'autodrome', status: 'completed', starts_at: '2026-03-02T06:00:00Z', ends_at: '2026-03-02T07:00:00Z', instructor_id: 'i1', student_id: 's1', group_id: null, vehicle_id: 'v1', branch_id: 'br1', created_at: '2026-02-20T10:00:00Z' },
      { id: 'l3', type: 'theory', status: 'completed', starts_at: '2026-03-03T15:00:00Z', ends_at: '2026-03-03T16:30:00Z', instructor_id: 'i2', student_id: null, group_id: 'g1', vehicle_id: null, branch_id: 'br1', created_at: '2026-02-20T10:00:00Z' },
      { id: 'l4', type: 'theory', status: 'completed', starts_at: '2026-03-04T15:00:00Z', ends_at: '2026-03-04T16:30:00Z', instructor_id: 'i2', student_id: 's1', group_id: null, vehicle_id: null, branch_id: 'br1', created_at: '2026-02-20T10:00:00Z' },
      { id: 'l5', type: 'driving', status: 'planned', starts_at: '2026-03-31T20:59:00Z', ends_at: '2026-03-31T22:29:00Z', instructor_id: 'i1', student_id: 's1', group_id: null, vehicle_id: 'v1', branch_id: null, created_at: '2026-02-20T10:00:00Z' },
      { id: 'l6', type: 'driving', status: 'cancelled', starts_at: '2026-03-31T21:00:00Z', ends_at: '2026-03-31T22:30:00Z', instructor_id: 'i1', student_id: 's1', group_id: null, vehicle_id: 'v1', branch_id: null, created_at: '2026-02-20T10:00:00Z' },
      { id: 'l7', type: 'driving', status: 'completed', starts_at: '2026-03-05T06:00:00Z', ends_at: '2026-03-05T07:30:00Z', instructor_id: 'i1', student_id: 's3', group_id: null, vehicle_id: 'v2', branch_id: null, created_at: '2026-02-20T10:00:00Z' },
    ],
    contracts: [
      { id: 'c1', number: 'Д-2026/001', student_id: 's1', category: 'B', status: 'active', signed_on: '2026-01-10', price: '50000.00', currency: 'RUB', created_at: '2026-01-10T10:00:00Z' },
      { id: 'c2', number: 'Д-2026/002', student_id: 's2', category: 'B', status: 'active', signed_on: '2026-01-11', price: '45000.50', currency: 'RUB', created_at: '2026-01-11T10:00:00Z' },
      { id: 'c3', number: 'Д-2026/003', student_id: 's1', category: 'C', status: 'terminated', signed_on: '2026-02-01', price: '10000.00', currency: 'RUB', created_at: '2026-02-01T10:00:00Z' },
    ],
    payments: [
      { id: 'p1', student_id: 's1', contract_id: 'c1', kind: 'payment', method: 'card', amount: '20000.00', currency: 'RUB', paid_at: '2026-02-28T21:00:00Z', created_at: '2026-02-28T21:00:05Z' },
      { id: 'p2', student_id: 's1', contract_id: 'c1', kind: 'refund', method: 'card', amount: '1500.50', currency: 'RUB', paid_at: '2026-03-15T12:00:00Z', created_at: '2026-03-15T12:00:05Z' },
      { id: 'p3', student_id: 's1', contract_id: null, kind: 'payment', method: 'cash', amount: '1000.00', currency: 'RUB', paid_at: '2026-03-31T20:59:00Z', created_at: '2026-03-31T20:59:05Z' },
      { id: 'p4', student_id: 's2', contract_id: 'c2', kind: 'payment', method: 'bank_transfer', amount: '45000.50', currency: 'RUB', paid_at: '2026-03-31T21:00:00Z', created_at: '2026-03-31T21:00:05Z' },
      { id: 'p5', student_id: 's3', contract_id: null, kind: 'payment', method: 'online', amount: '300.00', currency: 'RUB', paid_at: '2026-02-28T20:59:59Z', created_at: '2026-02-28T21:00:00Z' },
    ],
    leads: [
      { id: 'ld1', full_name: name('Новиков Илья'), phone: '+79992220001', email: null, category: 'B', source: 'website', status: 'new', student_id: null, created_at: '2026-03-01T08:00:00Z' },
      { id: 'ld2', full_name: name('Морозова Ольга'), phone: '+79992220002', email: 'olga@example.ru', category: null, source: 'referral', status: 'converted', student_id: 's2', created_at: '2026-03-31T20:59:59Z' },
      { id: 'ld3', full_name: name('Лебедев Антон'), phone: '+79992220003', email: null, category: 'A', source: 'ads', status: 'rejected', student_id: null, created_at: '2026-04-01T08:00:00Z' },
    ],
    expenses: [
      { id: 'e1', category: 'salary', amount: '30000.00', currency: 'RUB', spent_at: '2026-03-10T09:00:00Z', comment: 'зарплата' },
      { id: 'e2', category: 'fuel', amount: '2500.25', currency: 'RUB', spent_at: '2026-03-31T20:00:00Z', comment: null },
      { id: 'e3', category: 'rent', amount: '15000.00', currency: 'RUB', spent_at: '2026-04-01T09:00:00Z', comment: null },
    ],
  };
}
