/// Clamps a percentage into 0..=100.
pub fn clamp_percent(value: i32) -> i32 {
    value.max(0).$0min(100)
}
