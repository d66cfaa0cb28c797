// Small text helpers.

/** The words of `s`: runs of non-space characters, punctuation kept. */
export function words(s) {
  return s.split(/\s+/).filter(Boolean);
}

export function titleCase(s) {
  throw new Error('not implemented');
}
