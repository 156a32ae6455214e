# Sourced by the scripts: installs Debian packages that are missing.
#   tpu_apt_install TAG PACKAGE...   (as root, or through sudo; TAG prefixes the log lines)

tpu_apt_install() {
  local tag=$1 missing=() p
  shift
  for p in "$@"; do
    if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]]; then
      missing+=("$p")
    fi
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "[$tag] apt packages: ok"
    return 0
  fi
  echo "[$tag] apt packages: installing ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "[$tag] error: need root (or sudo) to install ${missing[*]}"; return 1; }
    sudo=(sudo)
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
  echo "[$tag] apt packages: installed"
}
