import { Type, type Static } from 'typebox';
import { CATEGORIES, LEAD_SOURCES, LEAD_STATUSES } from '../../domain/enums.js';
import { Paging, Period, type Paged } from '../common/params.js';
import { ListOf, Nullable, Timestamp } from '../common/responses.js';

const Status = Type.Enum([...LEAD_STATUSES], { type: 'string' });

export const Lead = Type.Object(
  {
    id: Type.String(),
    full_name: Type.String(),
    phone: Type.String(),
    email: Nullable(Type.String()),
    category: Nullable(Type.Enum([...CATEGORIES], { type: 'string' })),
    source: Type.Enum([...LEAD_SOURCES], { type: 'string' }),
    status: Status,
    student_id: Nullable(Type.String({ description: 'the student the lead became, once converted' })),
    created_at: Timestamp,
  },
  { additionalProperties: false, title: 'Lead' },
);
export type Lead = Static<typeof Lead>;

export const LeadList = ListOf(Lead);

export const LeadListQuery = Type.Object(
  {
    status: Type.Optional(Status),
    period_from: Type.Optional(Period('start')),
    period_to: Type.Optional(Period('end')),
    ...Paging,
  },
  { additionalProperties: false },
);
export type LeadListQuery = Paged<Static<typeof LeadListQuery>>;
