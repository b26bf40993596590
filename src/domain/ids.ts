/** Ids of every kind (schools and school-owned records): 1-64 characters of A-Z a-z 0-9 _ -. */
export const ID_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
export const ID = new RegExp(ID_PATTERN);
