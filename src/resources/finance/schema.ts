import { Type, type Static } from 'typebox';
import { EXPENSE_CATEGORIES, PAYMENT_METHODS } from '../../domain/enums.js';
import { Period } from '../common/params.js';
import { Currency, Money } from '../common/responses.js';

/** An object with every one of `keys` as a required Money property, none other. */
const MoneyBy = <K extends string>(keys: readonly K[], description: string) =>
  Type.Object(Object.fromEntries(keys.map((k) => [k, Money])) as Record<K, typeof Money>, { additionalProperties: false, description });

export const FinanceSummary = Type.Object(
  {
    period_from: Type.String({ description: 'as requested' }),
    period_to: Type.String({ description: 'as requested' }),
    currency: Currency,
    income: { ...Money, description: 'payments minus refunds with paid_at in the period' },
    expense: { ...Money, description: 'expenses with spent_at in the period' },
    profit: { ...Money, description: 'income - expense; negative for a loss' },
    income_by_method: MoneyBy(PAYMENT_METHODS, 'every payment method -> its payments minus its refunds; the values add up to income'),
    expense_by_category: MoneyBy(EXPENSE_CATEGORIES, 'every expense category -> its expenses; the values add up to expense'),
  },
  { additionalProperties: false, title: 'FinanceSummary' },
);
export type FinanceSummary = Static<typeof FinanceSummary>;

// Both bounds are required here, unlike on the lists.
export const FinanceSummaryQuery = Type.Object({ period_from: Period('start'), period_to: Period('end') }, { additionalProperties: false });
export type FinanceSummaryQuery = Static<typeof FinanceSummaryQuery>;
