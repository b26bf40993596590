import { Type, type Static } from 'typebox';
import { PAYMENT_KINDS, PAYMENT_METHODS } from '../../domain/enums.js';
import { Paging, Period, type Paged } from '../common/params.js';
import { Currency, ListOf, Money, Nullable, Timestamp } from '../common/responses.js';

export const Payment = Type.Object(
  {
    id: Type.String(),
    student_id: Type.String(),
    contract_id: Nullable(Type.String()),
    kind: Type.Enum([...PAYMENT_KINDS], { type: 'string' }),
    method: Type.Enum([...PAYMENT_METHODS], { type: 'string' }),
    amount: { ...Money, description: 'positive, refunds included (see kind)' },
    currency: Currency,
    paid_at: Timestamp,
    created_at: Timestamp,
  },
  { additionalProperties: false, title: 'Payment' },
);
export type Payment = Static<typeof Payment>;

export const PaymentList = ListOf(Payment);

export const PaymentListQuery = Type.Object(
  { period_from: Type.Optional(Period('start')), period_to: Type.Optional(Period('end')), ...Paging },
  { additionalProperties: false },
);
export type PaymentListQuery = Paged<Static<typeof PaymentListQuery>>;
