# Resolves TESSERA_CUDA (AUTO/ON/OFF) into TESSERA_WITH_CUDA.
include(CheckLanguage)
set(TESSERA_WITH_CUDA OFF)
if(TESSERA_CUDA STREQUAL "ON" OR TESSERA_CUDA STREQUAL "AUTO")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TESSERA_WITH_CUDA ON)
  elseif(TESSERA_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
elseif(NOT TESSERA_CUDA STREQUAL "OFF")
  message(FATAL_ERROR "TESSERA_CUDA must be AUTO, ON or OFF (got '${TESSERA_CUDA}')")
endif()
# The CUDA backend module itself is not in this release; the option and the
# toolkit detection are in place for it.
message(STATUS "Tessera: CUDA toolkit usable: ${TESSERA_WITH_CUDA} (TESSERA_CUDA=${TESSERA_CUDA}); "
               "no CUDA backend module is built yet")
