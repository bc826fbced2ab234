# Sourced by the scripts that fetch from Debian trixie (cuda_toolkit.sh, py313_trial.sh).
# private_apt DIR SOURCES_LINE: a private apt root in DIR (its own sources.list, lists, status and
# archive cache) so that the machine's apt sources and state are never touched; run apt-get with
# APT_CONFIG=DIR/apt.conf, and only `update`, `download` or `source --download-only`.
private_apt() {
  local dir=$1
  mkdir -p "$dir/etc/sources.list.d" "$dir/etc/apt.conf.d" "$dir/etc/preferences.d" \
    "$dir/lists/partial" "$dir/cache/archives/partial"
  echo "$2" >"$dir/etc/sources.list"
  touch "$dir/status"
  cat >"$dir/apt.conf" <<EOF
Dir::Etc::SourceList "$dir/etc/sources.list";
Dir::Etc::SourceParts "$dir/etc/sources.list.d";
Dir::Etc::Parts "$dir/etc/apt.conf.d";
Dir::Etc::Preferences "$dir/etc/preferences";
Dir::Etc::PreferencesParts "$dir/etc/preferences.d";
Dir::State "$dir/state";
Dir::State::Lists "$dir/lists";
Dir::State::status "$dir/status";
Dir::Cache "$dir/cache";
APT::Architecture "amd64";
Acquire::Languages "none";
APT::Sandbox::User "root";
EOF
}
