pub fn area(width: f64, height: f64) -> f64 {
    let scaled = width *$0;
    scaled * height
}
