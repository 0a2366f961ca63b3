fn parse(input: &str) -> bool {
    // regex: ISO date, matches 2024-01-31, 1999-12-01, not 2024-1-31, not 24-01-31$0
    input.is_empty()
}
