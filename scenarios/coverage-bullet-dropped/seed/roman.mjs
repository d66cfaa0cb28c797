export function toRoman(n) {
  throw new Error('not implemented');
}

export function fromRoman(text) {
  throw new Error('not implemented');
}
