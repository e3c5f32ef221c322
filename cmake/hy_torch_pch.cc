// The translation unit that builds hy_torch_pch's precompiled header
// (cmake/HyTorch.cmake); it holds no code of its own.
