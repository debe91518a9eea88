// The user's cache directory for what coli learns about a model between runs (the routing history):
// $XDG_CACHE_HOME/coli, else ~/.cache/coli, as the XDG base directory specification places caches. Never
// the model's directory, which may be read-only or shared by several users.
#pragma once

#include <filesystem>

namespace coli {

// Empty when neither $XDG_CACHE_HOME nor $HOME is set.
std::filesystem::path user_cache_dir();

}  // namespace coli
