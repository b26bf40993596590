import { Type, type Static } from 'typebox';
import { CATEGORIES, CONTRACT_STATUSES } from '../../domain/enums.js';
import { IdParam, Paging, type Paged } from '../common/params.js';
import { Currency, DateOnly, ListOf, Money, Timestamp } from '../common/responses.js';

export const Contract = Type.Object(
  {
    id: Type.String(),
    number: Type.String(),
    student_id: Type.String(),
    category: Type.Enum([...CATEGORIES], { type: 'string' }),
    status: Type.Enum([...CONTRACT_STATUSES], { type: 'string' }),
    signed_on: DateOnly,
    price: Money,
    paid: { ...Money, description: 'payments minus refunds on this contract' },
    debt: { ...Money, description: 'price - paid; negative when overpaid' },
    currency: Currency,
    created_at: Timestamp,
  },
  { additionalProperties: false, title: 'Contract' },
);
export type Contract = Static<typeof Contract>;

export const ContractList = ListOf(Contract);

export const ContractListQuery = Type.Object({ student_id: Type.Optional(IdParam('student')), ...Paging }, { additionalProperties: false });
export type ContractListQuery = Paged<Static<typeof ContractListQuery>>;
