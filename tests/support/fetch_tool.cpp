// Placeholder: filled in with the fetch client.
int main() { return 0; }
