#!/usr/bin/env bash
# Installs the system libraries the package links, and the CLIs the tests use, when missing.
set -euo pipefail
missing=()
dpkg -s libsqlite3-dev >/dev/null 2>&1 || missing+=(libsqlite3-dev)
dpkg -s liblmdb-dev >/dev/null 2>&1 || missing+=(liblmdb-dev)
dpkg -s lmdb-utils >/dev/null 2>&1 || missing+=(lmdb-utils)
dpkg -s zlib1g-dev >/dev/null 2>&1 || missing+=(zlib1g-dev)
dpkg -s libpq-dev >/dev/null 2>&1 || missing+=(libpq-dev)
# OpenSSL's libcrypto: AES and HMAC-SHA224 for Realm's encrypted files.
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
# Foundation's XMLParser (FoundationXML, which reads Core Data models) loads libxml2.
dpkg -s libxml2 >/dev/null 2>&1 || missing+=(libxml2)
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
command -v curl >/dev/null 2>&1 || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "Installing ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}"
fi
# The PostgreSQL tests run a server and a client in German (lc_messages, LANG), to show that the
# error codes do not depend on the language of the messages: the locale is made when missing.
if ! locale -a 2>/dev/null | grep -qix 'de_DE\.utf-\?8'; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    if [ ! -d /usr/share/i18n/locales ] || ! command -v localedef >/dev/null 2>&1; then
        $sudo_cmd apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq locales
    fi
    echo "Making the locale de_DE.UTF-8"
    $sudo_cmd localedef -i de_DE -f UTF-8 de_DE.UTF-8
fi
