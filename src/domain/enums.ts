/**
 * The enumerations of docs/api/resources.md ("Enumerations"). They feed the query validators, the
 * response schemas, the OpenAPI document and the importer alike.
 */
export const PLANS = ['Free', 'Standart', 'Profi', 'VIP'] as const;
export type Plan = (typeof PLANS)[number];
/** Plans whose schools may use the public API. */
export const API_PLANS: readonly Plan[] = ['Profi', 'VIP'];

export const CATEGORIES = ['A', 'A1', 'B', 'B1', 'BE', 'C', 'C1', 'CE', 'C1E', 'D', 'D1', 'DE', 'D1E', 'M', 'Tm', 'Tb'] as const;
export const STUDENT_STATUSES = ['enrolled', 'learning_theory', 'learning_practice', 'internal_exam', 'state_exam', 'graduated', 'expelled', 'on_hold'] as const;
export const LESSON_TYPES = ['driving', 'autodrome', 'theory', 'internal_exam'] as const;
export const LESSON_STATUSES = ['planned', 'completed', 'cancelled', 'no_show'] as const;
export const CONTRACT_STATUSES = ['active', 'completed', 'terminated'] as const;
export const PAYMENT_METHODS = ['cash', 'card', 'bank_transfer', 'online'] as const;
export const PAYMENT_KINDS = ['payment', 'refund'] as const;
export const LEAD_STATUSES = ['new', 'in_progress', 'converted', 'rejected'] as const;
export const LEAD_SOURCES = ['website', 'phone', 'walk_in', 'referral', 'social', 'ads', 'other'] as const;
export const TRANSMISSIONS = ['manual', 'automatic'] as const;
export const VEHICLE_STATUSES = ['active', 'repair', 'decommissioned'] as const;
export const EXPENSE_CATEGORIES = ['salary', 'fuel', 'repair', 'rent', 'insurance', 'marketing', 'utilities', 'taxes', 'other'] as const;

export function isPlan(value: string): value is Plan {
  return (PLANS as readonly string[]).includes(value);
}
