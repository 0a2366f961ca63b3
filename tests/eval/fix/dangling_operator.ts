export function discount(price: number, rate: number): number {
  const cut = price * $0;
  return price - cut;
}
