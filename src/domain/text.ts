/** What text the service keeps, by where it comes from. */

/** Not text at all: a NUL (which PostgreSQL cannot store) or half of a surrogate pair. */
// eslint-disable-next-line no-control-regex -- the NUL is what it looks for
const NOT_TEXT = /[\u0000\ud800-\udfff]/u;

/** Text of an import file: anything but what is not text (a comment may hold new lines). */
export const isText = (text: string): boolean => !NOT_TEXT.test(text);

// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
const NOT_A_NAME = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]/u;

/**
 * A name shown on one line (a school's, a key's): text without control characters (C0, C1,
 * the line and paragraph separators) or the marks that reverse the direction of what follows.
 */
export const isOneLine = (name: string): boolean => !NOT_A_NAME.test(name);
