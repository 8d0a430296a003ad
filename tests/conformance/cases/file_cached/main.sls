cache_it:
  file.cached:
    - name: salt://payload.txt

cache_again_with_hash:
  file.cached:
    - name: salt://payload.txt
    - source_hash: sha256=852390bf76068979d6e32161b89050a00431da9b76754134f1bbba34eee54e32
    - require:
      - file: cache_it

wrong_hash:
  file.cached:
    - name: salt://payload.txt
    - source_hash: sha256=0000000000000000000000000000000000000000000000000000000000000000
    - require:
      - file: cache_again_with_hash

local_file:
  file.managed:
    - name: /tmp/halite-oracle/file_cached/local.txt
    - makedirs: True
    - contents: here

local_present:
  file.cached:
    - name: /tmp/halite-oracle/file_cached/local.txt
    - require:
      - file: local_file

local_missing:
  file.cached:
    - name: /tmp/halite-oracle/file_cached/missing.txt

zero_hash:
  file.cached:
    - name: salt://payload.txt
    - source_hash: 0000
    - require:
      - file: cache_again_with_hash

uncache:
  file.not_cached:
    - name: salt://payload.txt
    - onfail:
      - file: wrong_hash

uncache_again:
  file.not_cached:
    - name: salt://payload.txt
    - require:
      - file: uncache

uncache_local:
  file.not_cached:
    - name: /tmp/halite-oracle/file_cached/local.txt

remote_without_hash:
  file.cached:
    - name: https://127.0.0.1:1/nothing.tar.gz
