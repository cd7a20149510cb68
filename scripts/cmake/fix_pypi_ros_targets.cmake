# Repairs the CMake package exports of the ROS 2 wheels from PyPI so that a
# standard ament_cmake interface package (marionette_interfaces) configures
# against them with plain cmake.
#
# Why this exists: the wheels' exported targets `<pkg>::<pkg>__rosidl_generator_py`
# carry INTERFACE_INCLUDE_DIRECTORIES of the machine that built the wheels
# (manylinux: /opt/python/cp311-cp311/include/python3.11 and NumPy's include
# directory under /opt/python/...). CMake refuses imported targets whose
# include directories do not exist ("Imported target ... includes non-existent
# path"), so `rosidl_generate_interfaces` cannot link our Python type support
# against std_msgs, trajectory_msgs, ... On a real ROS installation these paths
# are correct and this file is not used: colcon builds the package unchanged.
#
# How: scripts/build_interfaces.sh passes -DCMAKE_PROJECT_INCLUDE=<this file>
# (needs CMake >= 3.19), which CMake includes after every project() call. We
# defer a function to the end of the top-level directory, i.e. after every
# find_package() of the package has created its imported targets but before
# generation checks them, and rewrite only those include entries that do not
# exist on this machine and look like a Python or NumPy include directory, to
# this build's Python3_INCLUDE_DIRS / Python3_NumPy_INCLUDE_DIRS (the
# interpreter given by -DPython3_EXECUTABLE, i.e. the venv's). Everything else
# is left as the wheels exported it.

include_guard(GLOBAL)

if(CMAKE_VERSION VERSION_LESS 3.19)
  message(FATAL_ERROR
    "fix_pypi_ros_targets.cmake needs CMake >= 3.19 (cmake_language(DEFER)); "
    "this is CMake ${CMAKE_VERSION}. Install a newer cmake (e.g. `pip install cmake`).")
endif()

function(_fix_pypi_ros_targets_run)
  # Find the include directories of this build's Python, unless the package's
  # own find_package(Python3 ...) (done by rosidl_generator_py) already did.
  if(NOT Python3_INCLUDE_DIRS OR NOT Python3_NumPy_INCLUDE_DIRS)
    find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Module NumPy)
  endif()
  if(NOT Python3_INCLUDE_DIRS OR NOT Python3_NumPy_INCLUDE_DIRS)
    message(FATAL_ERROR
      "fix_pypi_ros_targets: could not determine the Python and NumPy include "
      "directories (Python3_INCLUDE_DIRS='${Python3_INCLUDE_DIRS}', "
      "Python3_NumPy_INCLUDE_DIRS='${Python3_NumPy_INCLUDE_DIRS}'). Is numpy "
      "installed for ${Python3_EXECUTABLE}?")
  endif()

  # Imported targets are scoped to the directory whose find_package() created
  # them: visit the top-level directory and all its subdirectories.
  set(_dirs "${CMAKE_SOURCE_DIR}")
  set(_fixed_targets "")
  while(_dirs)
    list(POP_FRONT _dirs _dir)
    get_property(_subdirs DIRECTORY "${_dir}" PROPERTY SUBDIRECTORIES)
    list(APPEND _dirs ${_subdirs})
    get_property(_targets DIRECTORY "${_dir}" PROPERTY IMPORTED_TARGETS)

    foreach(_target IN LISTS _targets)
      get_target_property(_includes "${_target}" INTERFACE_INCLUDE_DIRECTORIES)
      if(NOT _includes)
        continue()
      endif()
      set(_new_includes "")
      set(_changed FALSE)
      foreach(_inc IN LISTS _includes)
        # Generator expressions and existing paths are fine as they are.
        if(_inc MATCHES "^\\$<" OR EXISTS "${_inc}")
          list(APPEND _new_includes "${_inc}")
        elseif(_inc MATCHES "/numpy/(_core|core)/include/?$")
          list(APPEND _new_includes ${Python3_NumPy_INCLUDE_DIRS})
          set(_changed TRUE)
        elseif(_inc MATCHES "/include/python3\\.[0-9]+[a-z]*/?$")
          list(APPEND _new_includes ${Python3_INCLUDE_DIRS})
          set(_changed TRUE)
        else()
          # Some other missing directory: not ours to guess; CMake will report
          # it with the target's name.
          list(APPEND _new_includes "${_inc}")
        endif()
      endforeach()
      if(_changed)
        list(REMOVE_DUPLICATES _new_includes)
        set_property(TARGET "${_target}" PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_new_includes}")
        list(APPEND _fixed_targets "${_target}")
      endif()
    endforeach()
  endwhile()

  list(LENGTH _fixed_targets _count)
  message(STATUS
    "fix_pypi_ros_targets: pointed the Python/NumPy include directories of "
    "${_count} imported target(s) at ${Python3_INCLUDE_DIRS};${Python3_NumPy_INCLUDE_DIRS}")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _fix_pypi_ros_targets_run)
