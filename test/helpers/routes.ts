/** Every public route with a valid request, for the matrices run against all of them. */
export const ROUTES = [
  '/api/public/v1/students',
  '/api/public/v1/students/s1',
  '/api/public/v1/instructors',
  '/api/public/v1/vehicles',
  '/api/public/v1/lessons',
  '/api/public/v1/contracts',
  '/api/public/v1/payments',
  '/api/public/v1/leads',
  '/api/public/v1/reports/finance-summary?period_from=2026-01-01&period_to=2026-12-31',
  '/api/public/v1/changes',
] as const;

export const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';
