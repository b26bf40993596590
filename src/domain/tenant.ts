/** The school a request acts for, fixed by its key: every query is scoped by it. */
export interface Tenant {
  id: string;
  timezone: string;
  currency: string;
  /** The school's data version, read with the key: it keys the stored answers. */
  dataVersion: number;
}
