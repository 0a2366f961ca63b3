export function average(values: number[]): number {
  const total = values.reduce((a, b) => a + b, 0;$0
  return total / values.length;
}
