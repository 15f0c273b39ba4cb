// Shell completion scripts made from the CLI11 definition itself, so a new option or subcommand
// completes as soon as it parses. bash: one function that finds the subcommand, then offers its
// options, choices or file names; zsh: _arguments specs per command.
#include <algorithm>
#include <sstream>

#include "daemon/cli_app.h"

namespace pgwarden::daemon {

namespace {

std::vector<const CLI::App*> subcommandsOf(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::vector<std::string> namesOf(const CLI::Option& o) {
  std::vector<std::string> names;
  for (const auto& n : o.get_snames()) names.push_back("-" + n);
  for (const auto& n : o.get_lnames()) names.push_back("--" + n);
  return names;
}

// Flags have no type name; options that take a value do (FILE, LEVEL, TEXT, INT, ...).
bool takesValue(const CLI::Option& o) { return !o.get_type_name().empty(); }
bool takesFile(const CLI::Option& o) { return o.get_type_name() == "FILE"; }

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Words that may follow `app` on the command line: its options and subcommands.
std::vector<std::string> wordsOf(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_positional()) continue;
    for (const auto& n : namesOf(*o)) words.push_back(n);
  }
  for (const CLI::App* sub : subcommandsOf(app)) {
    if (!sub->get_group().empty()) words.push_back(sub->get_name());
  }
  return words;
}

const std::vector<std::string>* choicesOf(const CliParser& p, const CLI::Option* o) {
  const auto it = p.choices.find(o);
  return it == p.choices.end() ? nullptr : &it->second;
}

// The `case "$prev"` arms of one command: options whose value is a file, a choice or free text.
void bashValueCases(const CliParser& p, const CLI::App& app, std::ostream& out) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_positional() || !takesValue(*o)) continue;
    std::string names;
    for (const auto& n : namesOf(*o)) names += (names.empty() ? "" : "|") + n;
    out << "        " << names << ") ";
    if (const auto* c = choicesOf(p, o)) {
      out << "COMPREPLY=($(compgen -W \"" << join(*c) << "\" -- \"$cur\")); return ;;\n";
    } else if (takesFile(*o)) {
      out << "COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
    } else {
      out << "return ;;\n";
    }
  }
}

// The first positional's choices (report KIND, completion SHELL), offered with the options.
std::vector<std::string> positionalChoices(const CliParser& p, const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    if (!o->get_positional()) continue;
    if (const auto* c = choicesOf(p, o)) return *c;
  }
  return {};
}

std::string bashScript(const CliParser& p) {
  std::ostringstream out;
  std::string names;
  for (const CLI::App* sub : subcommandsOf(p.app))
    names += (names.empty() ? "" : "|") + sub->get_name();
  out << "# bash completion for pgwarden, made by `pgwarden completion bash` from its command "
         "line.\n"
         "_pgwarden() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" cmd=\"\" "
         "i\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    case \"${COMP_WORDS[i]}\" in\n"
         "      "
      << names
      << ") cmd=\"${COMP_WORDS[i]}\"; break ;;\n"
         "    esac\n"
         "  done\n"
         "  case \"$cmd\" in\n";
  const auto arm = [&](const CLI::App& app, const std::string& label) {
    std::vector<std::string> words = wordsOf(app);
    for (const auto& c : positionalChoices(p, app)) words.push_back(c);
    // A command of commands (history verify|export|...): its actions' options too.
    for (const CLI::App* inner : subcommandsOf(app)) {
      for (const auto& w : wordsOf(*inner)) words.push_back(w);
    }
    out << "    " << label << ")\n"
        << "      case \"$prev\" in\n";
    bashValueCases(p, app, out);
    for (const CLI::App* inner : subcommandsOf(app)) bashValueCases(p, *inner, out);
    out << "      esac\n"
        << "      COMPREPLY=($(compgen -W \"" << join(words) << "\" -- \"$cur\")) ;;\n";
  };
  arm(p.app, "\"\"");
  for (const CLI::App* sub : subcommandsOf(p.app)) arm(*sub, sub->get_name());
  out << "  esac\n"
         "}\n"
         "complete -o default -F _pgwarden pgwarden\n";
  return out.str();
}

// Text inside a zsh _arguments spec: no brackets, colons or quotes.
std::string zshText(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '[' || c == ']' || c == ':' || c == '\'' || c == '`' || c == '\\') continue;
    out += c;
  }
  return out;
}

std::string zshSpecs(const CliParser& p, const CLI::App& app, bool with_commands) {
  std::ostringstream out;
  for (const CLI::Option* o : app.get_options()) {
    std::string action;
    if (const auto* c = choicesOf(p, o)) {
      action = "(" + join(*c) + ")";
    } else if (takesFile(*o)) {
      action = "_files";
    }
    const std::string desc = zshText(o->get_description());
    if (o->get_positional()) {
      out << "    '1:" << zshText(o->get_name()) << ":" << action << "' \\\n";
      continue;
    }
    const auto names = namesOf(*o);
    std::string exclusive = "(" + join(names) + ")";
    for (const auto& n : names) {
      out << "    '" << (names.size() > 1 ? exclusive : "") << n << "[" << desc << "]";
      if (takesValue(*o)) out << ":" << zshText(o->get_type_name()) << ":" << action;
      out << "' \\\n";
    }
  }
  if (with_commands) out << "    '1:command:->command' \\\n    '*::argument:->argument' \\\n";
  return out.str();
}

std::string zshScript(const CliParser& p) {
  std::ostringstream out;
  out << "#compdef pgwarden\n"
         "# zsh completion for pgwarden, made by `pgwarden completion zsh` from its command line.\n"
         "_pgwarden() {\n"
         "  local curcontext=\"$curcontext\" state line\n"
         "  typeset -A opt_args\n"
         "  _arguments -C \\\n"
      << zshSpecs(p, p.app, true) << "    && return\n"
      << "  case $state in\n"
         "    command)\n"
         "      local -a commands=(\n";
  for (const CLI::App* sub : subcommandsOf(p.app)) {
    if (sub->get_group().empty()) continue;
    out << "        '" << sub->get_name() << ":" << zshText(sub->get_description()) << "'\n";
  }
  out << "      )\n"
         "      _describe command commands ;;\n"
         "    argument)\n"
         "      case $words[1] in\n";
  for (const CLI::App* sub : subcommandsOf(p.app)) {
    out << "        " << sub->get_name() << ")\n"
        << "          _arguments \\\n"
        << zshSpecs(p, *sub, false);
    // A command of commands: its actions as the first word, and their options (each once).
    std::vector<std::string> actions;
    std::vector<std::string> seen;
    for (const CLI::App* inner : subcommandsOf(*sub)) actions.push_back(inner->get_name());
    if (!actions.empty()) out << "    '1:action:(" << join(actions) << ")' \\\n";
    for (const CLI::App* inner : subcommandsOf(*sub)) {
      std::istringstream specs(zshSpecs(p, *inner, false));
      for (std::string line; std::getline(specs, line);) {
        if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
        seen.push_back(line);
        out << line << "\n";
      }
    }
    out << "            ;;\n";
  }
  out << "      esac ;;\n"
         "  esac\n"
         "}\n"
         "_pgwarden \"$@\"\n";
  return out.str();
}

}  // namespace

std::string completionScript(const std::string& shell) {
  CliParser parser;
  if (shell == "bash") return bashScript(parser);
  if (shell == "zsh") return zshScript(parser);
  return "";
}

}  // namespace pgwarden::daemon
