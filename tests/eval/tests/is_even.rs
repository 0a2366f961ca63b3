pub fn is_even(n: u64) -> bool {
    n % 2 == 0$0
}
