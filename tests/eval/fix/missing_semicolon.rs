pub fn total(prices: &[u32], count: u32) -> u32 {
    let sum: u32 = prices.iter().sum()$0
    sum * count
}
