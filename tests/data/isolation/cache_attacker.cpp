// The library issue 13's attack 3 made honest candidates load: same function, wrong answers.
torch::Tensor double_it(torch::Tensor x) { return torch::zeros_like(x); }
