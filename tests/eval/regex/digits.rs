fn check(input: &str) -> bool {
    // regex: one or more digits, matches 7, 42, 2024, not abc, not 4a$0
    input.is_empty()
}
