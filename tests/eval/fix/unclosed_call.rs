pub fn greet(name: &str) -> String {
    let message = format!("hello, {}", name;$0
    message
}
